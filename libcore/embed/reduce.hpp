// reduce_dims, the stage: features file -> PCA -> t-SNE -> embedding file.
//
// Input (sieve.features/1): /train/features float32 [N,F], /train/labels int32 [N],
// /train/sample_id int64 [N]. Each rank reads its block of feature rows (MPI-IO); labels
// and ids are small and read whole. Every check that can fail on the input runs before
// any heavy work and before the output is created: wrong schema, missing or mistyped
// datasets, mismatched lengths, NaN/Inf rows, too few points for the perplexity (per
// class when embedding per class).
// Output (sieve.embedding/1): /embedding float32 [N,d], /pca float32 [N,k], /labels,
// /sample_id, and attributes method, parameters, perplexity, iterations, kl_divergence,
// knn_preservation, trustworthiness (+ trustworthiness_points), pca_explained_variance.
// Written by all ranks together through AtomicOutput (parallel HDF5, a block of rows
// each). libcore/embed/reduce.cpp reads as its phases: the settings (embed_options,
// embed/options.hpp), groups, PCA, who embeds which group, the embedding, its figures,
// the file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "config/config.hpp"

namespace sieve::embed {

struct FeatureBlock {
  int64_t N = 0, F = 0;
  Range rows{0, 0};
  std::vector<float> x;            // [rows.size(), F] this rank's rows
  std::vector<int32_t> labels;     // [N]
  std::vector<int64_t> sample_id;  // [N]
};

// Collective read + validation; throws sieve::Error naming the file and what is wrong.
FeatureBlock read_features(const Comm& comm, const std::string& path);

// The whole stage (collective). `overwrite` as the tool flag.
void reduce_dims(const Comm& comm, const Config& cfg, const std::string& input,
                 const std::string& output, bool overwrite);

}  // namespace sieve::embed
