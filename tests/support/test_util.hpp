// Helpers shared by tests: scratch directories and paths to the build and shared data.
#pragma once
#include <cstdlib>
#include <optional>
#include <utility>
#include <string>

namespace sieve::test {

// A fresh directory under the build tree, unique per test name and rank count, agreed by
// all ranks of an MPI test. Removed at construction if left from an earlier run.
std::string scratch_dir(const std::string& name);
// ../shared/data next to the repository (Iris etc.).
std::string shared_data(const std::string& file);
// Directory of the built tools (for tests that run the programs).
std::string tool_path(const std::string& tool);
// Run a shell command; returns its exit status (WEXITSTATUS) and captures stdout+stderr.
int run_command(const std::string& cmd, std::string* output = nullptr);
// Shell prefix for an mpirun inside a test: the test binary is an MPI singleton whose
// PMIx/ORTE environment would make a nested mpirun fail silently, so it is dropped first.
std::string clean_mpi_env();
// clean_mpi_env() + "mpirun --oversubscribe -n <ranks> " (for tools run with <ranks> ranks).
std::string mpirun_prefix(int ranks);

// Unsets an environment variable for a scope and restores its old value after (a test that
// pins behaviour the variable would change, or that sets it itself).
class ScopedUnsetEnv {
 public:
  explicit ScopedUnsetEnv(std::string name) : name_(std::move(name)) {
    if (const char* v = std::getenv(name_.c_str())) old_ = v;
    unsetenv(name_.c_str());
  }
  ~ScopedUnsetEnv() {
    if (old_) setenv(name_.c_str(), old_->c_str(), 1);
    else unsetenv(name_.c_str());
  }
  ScopedUnsetEnv(const ScopedUnsetEnv&) = delete;
  ScopedUnsetEnv& operator=(const ScopedUnsetEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// For a test binary whose tests compare separately started runs bitwise: where the CPU has
// bf16, `precision: auto` times each network in both dtypes (docs/engine.md, "precision: auto
// per network"), and under the suite's load a near tie can go either way (a CI run on an AMX
// Xeon trained the two runs of test_train_tools' SameConfigTwice... in different dtypes). So
// the plain run takes auto's answer as fp32, unless SIEVE_PRECISION_AUTO already forces one;
// set before any tool is started, it is inherited by each. The binary's auto_bf16 and
// auto_fp32 runs (tests/CMakeLists.txt) check each dtype. Returns true, for a static.
inline bool pin_precision_auto_unless_forced() {
  setenv("SIEVE_PRECISION_AUTO", "fp32", /*overwrite=*/0);
  return true;
}

}  // namespace sieve::test
