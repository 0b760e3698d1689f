// Rank-0 printing and progress lines with rate and ETA.
//
// Logging goes to stderr so that stdout stays free for machine-readable output
// (e.g. `train_scaled --list-sweep`). Only rank 0 prints unless `all_ranks` is asked for.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

#include "util/error.hpp"

namespace sieve::log {

// Set once by the tool runner; used to silence non-zero ranks.
void set_rank(int rank, int size);
int rank();
bool is_root();
void set_tool_name(const std::string& name);
const std::string& tool_name();

// While it lives, a group of ranks that works apart from the others (train_scaled
// --ranks-per-run: groups that train different sweep runs at once) speaks for itself: info
// and warn print on the group's first rank instead of rank 0, each message after `prefix`
// ("run 5: "), so that every group's progress shows and names its run. Restores on exit.
class GroupScope {
 public:
  GroupScope(bool group_root, std::string prefix);
  ~GroupScope();
  GroupScope(const GroupScope&) = delete;
  GroupScope& operator=(const GroupScope&) = delete;

 private:
  bool saved_speaks_;
  std::string saved_prefix_;
};

// "tool: message" on rank 0 (or the first rank of a GroupScope's group).
void info(const std::string& msg);
// "tool: warning: message" on rank 0 (or the first rank of a GroupScope's group).
void warn(const std::string& msg);
// "tool: error: message" on the calling rank (errors are printed where they happen);
// "[rank r]" before the message in a job of several ranks unless `with_rank` is false.
void error(const std::string& msg, bool with_rank = true);

template <typename... Args>
void infof(const Args&... args) {
  info(cat(args...));
}

// Human-readable durations and sizes: "1h02m", "3.4 s", "512.0 MiB".
std::string format_duration(double seconds);
std::string format_bytes(double bytes);

// Progress over a known amount of work. Prints at most every `interval_s` seconds
// (and once at the end): "label: 1200/5000 samples (24%), 830 samples/s, ETA 5 s".
class Progress {
 public:
  Progress(std::string label, int64_t total, std::string unit, double interval_s = 2.0);
  // Record `done` units completed so far (absolute, not a delta).
  void update(int64_t done);
  // Print the final line with the mean rate.
  void finish();
  double elapsed_s() const;

 private:
  std::string label_, unit_;
  int64_t total_, done_ = 0;
  double interval_s_;
  std::chrono::steady_clock::time_point start_, last_print_;
  bool finished_ = false;
};

}  // namespace sieve::log
