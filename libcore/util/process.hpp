// Starting a child program without a shell.
//
// A path handed to `sh -c` is parsed as shell text: a run directory with a quote fails and
// one named x'$(touch PWNED)'y runs `touch`. Children are started from an argument vector
// instead (posix_spawn), so no byte of a path is ever interpreted.
#pragma once
#include <string>
#include <vector>

namespace sieve {

struct ProcessOptions {
  std::string cwd;          // working directory of the child ("" = this process's)
  std::string output_file;  // stdout and stderr of the child, truncated ("" = inherited)
};

// Runs argv[0] (looked up in PATH when it has no '/') with arguments argv[1..], stdin from
// /dev/null, and waits for it. Returns its exit code; 127 when the program cannot be found
// or started, 128 + N when it died of signal N. Throws Error (naming the file) when the
// output file cannot be opened or the working directory entered.
int run_process(const std::vector<std::string>& argv, const ProcessOptions& opt = {});

}  // namespace sieve
