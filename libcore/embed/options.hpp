// The reader of the 'embed' section (reduce_dims); its keys are declared beside it in
// embed/keys.cpp.
#pragma once
#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "embed/keys.hpp"
#include "embed/tsne.hpp"

namespace sieve {

namespace embed {

// The embed section as reduce_dims reads it.
struct EmbedOptions {
  std::string method;  // tsne | pca
  bool per_class = false;
  TsneOptions opt;
  std::string locality;   // embed.tsne.locality_order
  std::string repulsion;  // embed.tsne.repulsion (auto resolved per group)
  int64_t pca_components = 0;
  bool whiten = false;
  int64_t max_trust = 0;  // embed.quality.trustworthiness_points
};

// Read and validate the embed.* keys (UsageError naming the key).
EmbedOptions embed_options(const Config& cfg);

}  // namespace embed
}  // namespace sieve
