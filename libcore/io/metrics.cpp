#include "io/metrics.hpp"

#include <fstream>

#include "util/error.hpp"

namespace sieve {

MetricsWriter::MetricsWriter(const std::string& path, bool is_root, bool truncate) : path_(path) {
  if (path.empty() || !is_root) return;
  f_ = std::fopen(path.c_str(), truncate ? "w" : "a");
  if (!f_) throw Error(cat(path, ": cannot open metrics file for writing"));
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

MetricsWriter& MetricsWriter::operator=(MetricsWriter&& o) noexcept {
  if (this != &o) {
    if (f_) std::fclose(f_);
    f_ = o.f_;
    path_ = std::move(o.path_);
    o.f_ = nullptr;
  }
  return *this;
}

void MetricsWriter::write(const Json& record) {
  if (!f_) return;
  std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    throw Error(cat(path_, ": metrics write failed (disk full?)"));
}

std::vector<Json> read_json_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(cat(path, ": cannot open metrics file"));
  std::vector<Json> out;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    try {
      out.push_back(Json::parse(line));
    } catch (const Json::parse_error&) {
      if (in.peek() == EOF) break;  // torn last line of a crashed writer
      throw Error(cat(path, ":", lineno, ": not valid JSON"));
    }
  }
  return out;
}

}  // namespace sieve
