// The 'filter' section's keys, declared once in cluster/keys.cpp with default, range and help,
// beside their readers: filter_options (cluster/options.cpp: the clustering detectors' keys and
// filter.method) and cluster/program.cpp (knn.*, max_flagged, compare). keys.cpp is built into
// sieve_core, so that every program has the whole schema (pipeline/schema.hpp) without linking this
// module.
#pragma once
#include "config/config.hpp"

namespace sieve {

void add_filter_keys(ConfigSchema& s);  // filter.*: cluster_filter

}  // namespace sieve
