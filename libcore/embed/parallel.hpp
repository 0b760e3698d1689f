// When the embedding code uses its OpenMP threads.
#pragma once
#include <cstdint>

namespace sieve::embed {

// Below this many points (rows of the loop) the loops of k-NN, affinities, quality and each
// t-SNE iteration run on one thread: each loop is then tens of microseconds of work, and
// on a busy node a thread team's barrier waits for a preempted thread. Per-class t-SNE of
// 300-point classes ran 6x slower with 2 spinning threads on a loaded 2-core machine than
// with one.
constexpr int64_t kMinPointsForThreads = 4096;

}  // namespace sieve::embed
