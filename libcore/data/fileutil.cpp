#include "data/fileutil.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "util/error.hpp"

namespace sieve::data {

bool is_regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw Error(cat(path, ": no such file"));
  if (!S_ISREG(st.st_mode)) throw Error(cat(path, ": not a regular file"));
  return int64_t(st.st_size);
}

void read_at(const std::string& path, int64_t offset, int64_t n, void* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(cat(path, ": cannot open: ", std::strerror(errno)));
  auto* p = static_cast<char*>(out);
  int64_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, p + done, size_t(n - done), off_t(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int e = errno;
      ::close(fd);
      if (r == 0) throw Error(cat(path, ": unexpected end of file at byte ", offset + done, " (truncated?)"));
      throw Error(cat(path, ": read failed at byte ", offset + done, ": ", std::strerror(e)));
    }
    done += r;
  }
  ::close(fd);
}

std::vector<uint8_t> read_maybe_gz(const std::string& path, int64_t max_bytes) {
  file_size(path);  // "no such file" / "not a regular file"
  gzFile gz = gzopen(path.c_str(), "rb");
  if (!gz) throw Error(cat(path, ": cannot open: ", std::strerror(errno)));
  gzbuffer(gz, 1 << 20);
  std::vector<uint8_t> out;
  // Read in chunks that grow from 128 KiB to 4 MiB: small files (tests, fuzzing) do not pay
  // for zeroing 4 MiB per file, large ones still read in big steps.
  size_t step = 1 << 16;
  while (true) {
    size_t old = out.size();
    step = std::min<size_t>(step * 2, 1 << 22);
    out.resize(old + step);
    int r = gzread(gz, out.data() + old, unsigned(step));
    if (r < 0) {
      int errnum = 0;
      std::string msg = gzerror(gz, &errnum);
      gzclose(gz);
      throw Error(cat(path, ": corrupt or truncated gzip data (", msg, ")"));
    }
    out.resize(old + size_t(r));
    if (int64_t(out.size()) > max_bytes) {
      gzclose(gz);
      throw Error(cat(path, ": larger than ", max_bytes, " bytes: not a plausible input file"));
    }
    if (r == 0) break;
  }
  int errnum = 0;
  const char* msg = gzerror(gz, &errnum);
  if (errnum != Z_OK && errnum != Z_STREAM_END) {
    std::string m = msg ? msg : "";
    gzclose(gz);
    throw Error(cat(path, ": corrupt or truncated gzip data (", m, ")"));
  }
  gzclose(gz);
  return out;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\r' || s[a] == '\n')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\r' || s[b - 1] == '\n')) --b;
  return s.substr(a, b - a);
}

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(cat(path, ": cannot open for sync: ", std::strerror(errno)));
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (rc != 0 && e != EINVAL && e != EROFS)
    throw Error(cat(path, ": fsync failed (disk full or I/O error?): ", std::strerror(e)));
}

}  // namespace sieve::data
