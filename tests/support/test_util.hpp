// Helpers shared by tests: scratch directories and paths to the build and shared data.
#pragma once
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

}  // namespace sieve::test
