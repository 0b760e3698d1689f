// The step timeline: Chrome trace-event JSON ("X" complete events), which Perfetto
// (ui.perfetto.dev) and chrome://tracing load as they are.
//
// One process-wide recorder, off unless a tool was given `--trace FILE`: then every
// instrumented span (forward/backward per model unit, each gradient bucket's reduction,
// waits, data loading, the optimizer) is kept in memory on its rank, and the trainer writes
// ONE file at the end of training in which each rank is a process (pid = rank), so the ranks
// line up on one time axis. Times are microseconds since an origin the ranks take together
// right after a collective (set_origin), so spans of different ranks are comparable to within
// the collective's skew on one node (clocks of different nodes are not synchronised).
//
// Lanes (tid): kMain is what the main thread is doing (compute, blocked waits, optimizer);
// kComm holds reductions in flight, which overlap backward and would otherwise hide it.
// Reductions in flight overlap each other without nesting, which a trace viewer cannot draw
// on one track, so each kComm span goes to the first of the lanes kComm, kComm+1, ... that is
// free at its start (tids kComm.. in the file, "reductions in flight", "... 2", ...).
// Categories name where the time goes in the summary (report, scripts/trace_summary.py):
// "compute", "comm" (in flight, overlapped), "wait" (blocked on communication: exposed),
// "negotiate" (fusion-queue agreement), "data" (waiting for a batch), "optimizer", "step".
// Disabled, a Span costs one branch; enabled, one steady_clock read at each end.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace sieve::trace {

enum Lane : int { kMain = 0, kComm = 1 };

struct Event {
  std::string name;
  const char* cat;  // a string literal
  double ts_us, dur_us;
  int tid;
  std::string args;  // "" or a JSON object body without braces: "\"bytes\": 4096"
};

// Recording on (the path the trainer writes to) or off ("").
void enable(const std::string& path);
bool enabled();
const std::string& path();
// Microseconds since the origin (steady clock).
double now_us();
// Take the time origin now (call on every rank right after a collective).
void set_origin();
// Record a finished span [t0, t1] (us). Dropped beyond max_events (then the file says so).
void complete(std::string name, const char* cat, double t0_us, double t1_us, int tid = kMain,
              std::string args = {});
// Events recorded on this rank so far (tests), and forgetting them.
const std::vector<Event>& events();
void clear();
// This rank's events as trace-event JSON list elements (each followed by ",\n"), then the
// names of its process and thread tracks; `pid` is the rank. comm/trace_gather.hpp gathers
// every rank's into the file.
std::string rank_json(int pid);
// Events dropped on this rank beyond max_events.
size_t dropped();

// RAII span on the main lane.
class Span {
 public:
  Span(const char* cat, std::string name) : on_(enabled()) {
    if (on_) cat_ = cat, name_ = std::move(name), t0_ = now_us();
  }
  ~Span() {
    if (on_) complete(std::move(name_), cat_, t0_, now_us());
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  bool on_;
  const char* cat_ = nullptr;
  std::string name_;
  double t0_ = 0;
};

}  // namespace sieve::trace
