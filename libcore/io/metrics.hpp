// Metrics as JSON lines: one object per line, appended and flushed as they happen, so
// that a crashed run keeps every line written before the crash. Only rank 0 writes.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

namespace sieve {

using Json = nlohmann::json;

class MetricsWriter {
 public:
  MetricsWriter() = default;
  // Opens `path` for appending (truncating first when `truncate`). Empty path: disabled.
  MetricsWriter(const std::string& path, bool is_root, bool truncate = false);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  MetricsWriter(MetricsWriter&& o) noexcept : f_(o.f_), path_(std::move(o.path_)) { o.f_ = nullptr; }
  MetricsWriter& operator=(MetricsWriter&& o) noexcept;

  void write(const Json& record);
  const std::string& path() const { return path_; }

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

// Read every line of a JSON-lines file (skipping a torn last line from a crash).
std::vector<Json> read_json_lines(const std::string& path);

}  // namespace sieve
