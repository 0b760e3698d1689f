#include "report/document.hpp"

#include "util/error.hpp"

namespace sieve::report {

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Markdown table cells: pipes would end the cell.
static std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

void Document::section(const std::string& title, const std::string& id) {
  html_ += cat("<h2 id=\"", id, "\">", html_escape(title), "</h2>\n");
  md_ += cat("\n## ", title, "\n\n");
  toc_html_ += cat("<li><a href=\"#", id, "\">", html_escape(title), "</a></li>");
  toc_md_ += cat("- [", title, "](#", id, ")\n");
}

void Document::paragraph(const std::string& text) {
  html_ += cat("<p>", html_escape(text), "</p>\n");
  md_ += text + "\n\n";
}

void Document::note(const std::string& text) {
  html_ += cat("<p class=\"note\"><em>", html_escape(text), "</em></p>\n");
  md_ += cat("*", text, "*\n\n");
}

void Document::bullets(const std::vector<std::string>& items) {
  html_ += "<ul>\n";
  for (auto& i : items) {
    html_ += cat("<li>", html_escape(i), "</li>\n");
    md_ += cat("- ", i, "\n");
  }
  html_ += "</ul>\n";
  md_ += "\n";
}

void Document::table(const Row& header, const std::vector<Row>& rows, const std::string& caption) {
  html_ += "<table>\n";
  if (!caption.empty()) html_ += cat("<caption>", html_escape(caption), "</caption>\n");
  html_ += "<thead><tr>";
  for (auto& h : header) html_ += cat("<th>", html_escape(h), "</th>");
  html_ += "</tr></thead>\n<tbody>\n";
  for (auto& r : rows) {
    html_ += "<tr>";
    for (auto& c : r) html_ += cat("<td>", html_escape(c), "</td>");
    html_ += "</tr>\n";
  }
  html_ += "</tbody></table>\n";
  if (!caption.empty()) md_ += cat("**", caption, "**\n\n");
  md_ += "|";
  for (auto& h : header) md_ += cat(" ", md_cell(h), " |");
  md_ += "\n|";
  for (size_t i = 0; i < header.size(); ++i) md_ += "---|";
  md_ += "\n";
  for (auto& r : rows) {
    md_ += "|";
    for (auto& c : r) md_ += cat(" ", md_cell(c), " |");
    md_ += "\n";
  }
  md_ += "\n";
}

void Document::figure(const std::string& image, const std::string& caption,
                      const std::vector<std::string>& data_files, const std::string& id) {
  html_ += cat("<figure id=\"", id, "\"><img src=\"", html_escape(image), "\" alt=\"",
               html_escape(caption), "\"><figcaption>", html_escape(caption));
  md_ += cat("![", caption, "](", image, ")\n\n*", caption, "*");
  if (!data_files.empty()) {
    html_ += " — data:";
    md_ += " — data:";
    for (auto& f : data_files) {
      html_ += cat(" <a href=\"", html_escape(f), "\">", html_escape(f), "</a>");
      md_ += cat(" [", f, "](", f, ")");
    }
  }
  html_ += "</figcaption></figure>\n";
  md_ += "\n\n";
}

void Document::link(const std::string& text, const std::string& href) {
  html_ += cat("<p><a href=\"", html_escape(href), "\">", html_escape(text), "</a></p>\n");
  md_ += cat("[", text, "](", href, ")\n\n");
}

std::string Document::html() const {
  return cat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>",
      html_escape(title_),
      "</title>\n<style>\n"
      "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\n"
      "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #bbb;padding:3px 8px;"
      "text-align:right}th{background:#eee}caption{font-weight:bold;margin-bottom:4px}\n"
      "figure{margin:1em 0}figure img{max-width:100%;border:1px solid #ddd}"
      "figcaption{font-size:90%;color:#555}.note{color:#a60}\n"
      "</style>\n</head>\n<body>\n<h1>",
      html_escape(title_), "</h1>\n<nav><ul>", toc_html_, "</ul></nav>\n", html_,
      "</body>\n</html>\n");
}

std::string Document::markdown() const {
  return cat("# ", title_, "\n\n", toc_md_, md_);
}

}  // namespace sieve::report
