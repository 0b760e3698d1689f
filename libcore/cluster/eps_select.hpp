// Choosing DBSCAN's eps from the data: the k-distance elbow (Ester et al. 1996, sec. 4.2).
//
// For a sample of query points, the k-distance is the distance to the k-th nearest point
// counting the point itself (k = min_samples), i.e. the smallest eps at which that point
// would be a core point. Sorted ascending, the curve is flat inside clusters and rises
// steeply for outliers; the elbow (the point farthest below the chord from the first to
// the last value, "kneedle") separates the two, and its k-distance is the chosen eps.
#pragma once
#include <cstdint>
#include <vector>

namespace sieve::cluster {

// k-distances (ascending) of up to `max_queries` sampled points of x [n, d] against all of
// x. Exact: an expanding ring search on a grid (d <= 3), all pairs otherwise.
std::vector<double> k_distances(const float* x, int64_t n, int d, int64_t k, int64_t max_queries,
                                uint64_t seed);

// Index of the elbow of an ascending curve (0 for curves with < 3 points or no rise).
int64_t elbow_index(const std::vector<double>& ascending);

}  // namespace sieve::cluster
