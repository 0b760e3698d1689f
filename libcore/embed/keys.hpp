// The 'embed' section's keys, declared once in embed/keys.cpp with default, range and help,
// beside their readers: embed_options (embed/options.cpp). keys.cpp is built into sieve_core, so
// that every program has the whole schema (pipeline/schema.hpp) without linking this module.
#pragma once
#include "config/config.hpp"

namespace sieve {

void add_embed_keys(ConfigSchema& s);  // embed.*: reduce_dims (PCA, t-SNE)

}  // namespace sieve
