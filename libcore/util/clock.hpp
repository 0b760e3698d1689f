// Wall-clock intervals for the timings tools print and store (progress lines, per-stage and
// per-detector seconds): the monotonic clock, so a clock change cannot make one negative.
#pragma once
#include <chrono>

namespace sieve {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace sieve
