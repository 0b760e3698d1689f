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

}  // namespace sieve::test
