// The 'embed' section (reduce_dims): its keys, declared once with default, range and help,
// and their reader.
#pragma once
#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "embed/tsne.hpp"

namespace sieve {

void add_embed_keys(ConfigSchema& s);  // embed.*: reduce_dims (PCA, t-SNE)

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
