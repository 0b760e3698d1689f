#include "io/atomic_output.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "util/error.hpp"

namespace fs = std::filesystem;

namespace sieve {

void check_output_path(const std::string& path, bool overwrite) {
  if (path.empty()) throw UsageError("output path is empty");
  fs::path p(path);
  if (fs::exists(p) && !overwrite)
    throw UsageError(cat(path, ": output exists (pass --overwrite to replace it)"));
  fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!fs::is_directory(dir)) throw Error(cat(path, ": output directory ", dir.string(), " does not exist"));
  if (access(dir.c_str(), W_OK) != 0)
    throw Error(cat(path, ": output directory ", dir.string(), " is not writable"));
}

AtomicOutput::AtomicOutput(std::string final_path, bool overwrite, const Comm& comm, bool is_dir)
    : final_(std::move(final_path)), comm_(comm), is_dir_(is_dir) {
  // Every rank checks (they may see different file systems only in broken setups);
  // the temporary name comes from rank 0 so that all ranks agree on it.
  check_output_path(final_, overwrite);
  fs::path p(final_);
  std::string tmp;
  if (comm_.is_root())
    tmp = (p.parent_path() / cat(".", p.filename().string(), ".tmp-", getpid())).string();
  comm_.bcast_string(tmp);
  tmp_ = tmp;
  if (is_dir_ && comm_.is_root()) fs::create_directories(tmp_);
  comm_.barrier();
}

AtomicOutput::~AtomicOutput() {
  if (committed_ || !comm_.is_root()) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

void AtomicOutput::commit() {
  comm_.barrier();
  std::string err;
  if (comm_.is_root()) {
    std::error_code ec;
    if (is_dir_ && fs::exists(final_)) fs::remove_all(final_, ec);
    fs::rename(tmp_, final_, ec);
    if (ec) err = cat(final_, ": cannot move the finished output into place: ", ec.message());
  }
  comm_.bcast_string(err);
  if (!err.empty()) throw CollectiveError(err);
  committed_ = true;
}

void write_text_atomic(const std::string& path, const std::string& text) {
  std::string tmp = cat(path, ".tmp-", getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error(cat(path, ": write failed (disk full or directory not writable?)"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(cat(path, ": cannot rename temporary file into place"));
  }
}

std::string config_sidecar_path(const std::string& output_path) {
  fs::path p(output_path);
  return (p.parent_path() / (p.stem().string() + ".config.yaml")).string();
}

}  // namespace sieve
