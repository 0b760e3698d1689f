// Small helpers for reading input files (internal to libcore/data).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sieve::data {

bool is_regular_file(const std::string& path);
bool is_directory(const std::string& path);
// Size in bytes; throws Error "PATH: no such file" when missing.
int64_t file_size(const std::string& path);
// Read `n` bytes at `offset`; throws Error naming the file on a short read.
void read_at(const std::string& path, int64_t offset, int64_t n, void* out);
// Whole file, transparently gunzipped when it is gzip-compressed (zlib gzread); `max_bytes`
// guards against absurd inputs. Throws Error naming the file on corrupt/truncated gzip.
std::vector<uint8_t> read_maybe_gz(const std::string& path, int64_t max_bytes);
// Lines of a small text file (no trailing '\r'); empty when the file is missing.
std::vector<std::string> read_lines(const std::string& path);
std::string trim(const std::string& s);
// fsync a file (or directory) by path; errors are reported, not ignored.
void fsync_path(const std::string& path);

}  // namespace sieve::data
