// The 'report' section's keys (tools/report and its a-priori estimates), declared once in
// report/keys.cpp with default, range and help, beside their readers (report/report.cpp
// and the section writers). keys.cpp is built into sieve_core, so that every program has
// the whole schema (pipeline/schema.hpp) without linking this module.
#pragma once
#include "config/config.hpp"

namespace sieve {

void add_report_keys(ConfigSchema& s);  // report.*: report and a-priori estimates

}  // namespace sieve
