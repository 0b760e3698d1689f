// The cluster_filter program (tools/cluster_filter.cpp is its thin main).
//
// Reads the embedding (the input of the cluster methods) and, where present, the features
// file (penultimate features and class probabilities: the inputs of the knn and confident
// detectors). The detector named by filter.method makes /keep; /random_keep removes the
// same number of samples per class at random. Where the dataset carries
// /train/noise_truth and filter.compare is on, the reference detectors (dbscan, knn,
// confident) all run and each is scored against the truth (docs/formats.md,
// sieve.filter/1, group /detectors).
//
// Ranks: the features and probabilities are row-distributed (a block of rows a rank, never
// gathered); the small per-sample things (labels, ids, the embedding, scores, masks) are
// whole on every rank; rank 0 writes the file (inputs.hpp, docs/cluster.md "Ranks and
// memory").
#pragma once
#include "run/tool.hpp"

namespace sieve::cluster {

void add_filter_flags(po::options_description& d);
void cluster_filter_main(ToolContext& ctx);

}  // namespace sieve::cluster
