// One report, two renderings: index.html (self-contained page, figures as <img>) and
// index.md (GitHub-flavoured Markdown). Sections are appended once and rendered to both,
// so the two files always carry the same tables and numbers.
#pragma once
#include <string>
#include <vector>

#include "report/plot.hpp"

namespace sieve::report {

std::string html_escape(const std::string& s);

class Document {
 public:
  explicit Document(std::string title) : title_(std::move(title)) {}
  void section(const std::string& title, const std::string& id);
  void paragraph(const std::string& text);  // plain text (escaped)
  void note(const std::string& text);       // "missing input" remark, shown in italics
  // A list of plain-text items.
  void bullets(const std::vector<std::string>& items);
  // A table; `caption` may be empty. Cells are plain text.
  void table(const Row& header, const std::vector<Row>& rows, const std::string& caption = "");
  // A figure (image path relative to the report directory) with links to its data.
  void figure(const std::string& image, const std::string& caption,
              const std::vector<std::string>& data_files, const std::string& id);
  // A link on its own line.
  void link(const std::string& text, const std::string& href);

  std::string html() const;
  std::string markdown() const;

 private:
  std::string title_;
  std::string html_, md_, toc_html_, toc_md_;
};

}  // namespace sieve::report
