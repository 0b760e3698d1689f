// The reader of the 'filter' section's clustering options (cluster_filter); the section's
// keys are declared beside it in cluster/keys.cpp. The detector-level keys (knn.*,
// max_flagged, compare) are read by cluster/program.cpp.
#pragma once
#include "cluster/filter.hpp"
#include "cluster/keys.hpp"
#include "config/config.hpp"

namespace sieve {

namespace cluster {

// Read and validate the filter.* keys of the clustering detectors (UsageError naming the
// key when out of range).
FilterOptions filter_options(const Config& cfg);

}  // namespace cluster
}  // namespace sieve
