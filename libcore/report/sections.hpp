// The report's sections (internal to libcore/report). Each appends to the Document and
// writes its CSVs and figures into the report directory; a section whose inputs are
// missing adds a note instead.
#pragma once
#include <string>

#include "config/config.hpp"
#include "report/document.hpp"
#include "report/plot.hpp"
#include "report/run_data.hpp"
#include "report/stats.hpp"
#include "util/error.hpp"

namespace sieve::report {

struct SectionContext {
  const Config& cfg;
  const RunData& data;
  std::string dir;  // the (temporary) report directory
  FigureFormat format;
  Document& doc;
  // "figures/<name>.<ext>"
  std::string figure_path(const std::string& name) const {
    return cat("figures/", name, ".", extension(format));
  }
};

void section_overview(SectionContext& c);
void section_accuracy(SectionContext& c);
void section_reduction(SectionContext& c);
void section_suspicious(SectionContext& c);  // suspicious.cpp
void section_embedding(SectionContext& c);
void section_throughput(SectionContext& c);
void section_pretrain(SectionContext& c);
void section_estimates(SectionContext& c);
void section_comm(SectionContext& c);

}  // namespace sieve::report
