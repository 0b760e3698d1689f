// The 'filter' section (cluster_filter): its keys, declared once with default, range and
// help, and the reader of the clustering detectors' options. The detector-level keys
// (filter.method, max_flagged, knn.*) are read by cluster/program.cpp and
// cluster/detectors.cpp under the names declared here.
#pragma once
#include "cluster/filter.hpp"
#include "config/config.hpp"

namespace sieve {

void add_filter_keys(ConfigSchema& s);  // filter.*: cluster_filter

namespace cluster {

// Read and validate the filter.* keys of the clustering detectors (UsageError naming the
// key when out of range).
FilterOptions filter_options(const Config& cfg);

}  // namespace cluster
}  // namespace sieve
