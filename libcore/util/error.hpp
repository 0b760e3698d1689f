// Error types and check macros shared by every Sieve program.
//
// Exit-code contract (every tool): 0 success, 1 runtime error (bad input file, I/O,
// divergence), 2 usage/config error (bad flag, unknown key, wrong type, out of range).
// Messages are one line and name the file, key or flag and what was expected.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace sieve {

// Concatenate anything streamable into one string: cat("key '", k, "': expected ", n).
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// A runtime failure the user can act on (exit 1): bad input data, I/O, divergence.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, int exit_code = 1)
      : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// A mistake in how the program was called: flags, config keys, types, ranges (exit 2).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what, 2) {}
};

// A runtime failure that every rank raises with the same message, after agreeing on it
// through a collective (a broadcast error string, an all-reduced flag). run_tool prints it
// once (rank 0) and every rank returns normally, instead of one line per rank and an
// MPI_Abort. Throw it only where all ranks are guaranteed to throw it.
class CollectiveError : public Error {
 public:
  explicit CollectiveError(const std::string& what, int exit_code = 1) : Error(what, exit_code) {}
};

}  // namespace sieve

// Internal invariant: a failure is a Sieve bug, so the message names the source line.
#define SIEVE_ASSERT(cond, ...)                                                          \
  do {                                                                                   \
    if (!(cond))                                                                         \
      throw ::sieve::Error(::sieve::cat(__FILE__, ":", __LINE__, ": internal check '", #cond, \
                                        "' failed. ", ##__VA_ARGS__));                   \
  } while (0)

// User-facing check: throws sieve::Error (exit 1) with the message as given.
#define SIEVE_CHECK(cond, ...)                                   \
  do {                                                           \
    if (!(cond)) throw ::sieve::Error(::sieve::cat(__VA_ARGS__)); \
  } while (0)
