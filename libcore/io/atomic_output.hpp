// Outputs that appear complete or not at all.
//
// A stage writes to a hidden temporary name in the destination directory and renames it
// into place only after everything was written and closed: a crashed or killed stage never
// leaves a file that looks finished, and a previous good output stays intact until the new
// one is complete (rename is atomic within one file system).
#pragma once
#include <string>

#include "comm/comm.hpp"

namespace sieve {

class AtomicOutput {
 public:
  // Checks (on every rank, collectively) that `final_path` does not exist unless
  // `overwrite`, and that its directory exists and is writable; picks the temporary name.
  AtomicOutput(std::string final_path, bool overwrite, const Comm& comm, bool is_dir = false);
  ~AtomicOutput();  // removes the temporary if commit() was not reached
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  const std::string& tmp_path() const { return tmp_; }
  const std::string& final_path() const { return final_; }
  // Barrier, then rank 0 renames the temporary onto the final path, then barrier.
  void commit();

 private:
  std::string final_, tmp_;
  const Comm& comm_;
  bool is_dir_, committed_ = false;
};

// Check an output path up front (exists without --overwrite, missing or unwritable
// directory) so that a stage fails before doing any work. Throws Error naming the path.
void check_output_path(const std::string& path, bool overwrite);

// Write a small text file atomically (rank-local; call on one rank).
void write_text_atomic(const std::string& path, const std::string& text);

// "out/model.h5" -> "out/model.config.yaml": the resolved config next to an output.
std::string config_sidecar_path(const std::string& output_path);

}  // namespace sieve
