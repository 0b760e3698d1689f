// The 'data' section's keys (shard_dataset), declared once in data/keys.cpp with default,
// range and help, beside their readers: data/shard.cpp, data/source.cpp and
// label_noise_options (data/label_noise.cpp). keys.cpp is built into sieve_core, so that
// every program has the whole schema (pipeline/schema.hpp) without linking this module.
#pragma once
#include "config/config.hpp"

namespace sieve {

void add_data_keys(ConfigSchema& s);  // data.*: shard_dataset

}  // namespace sieve
