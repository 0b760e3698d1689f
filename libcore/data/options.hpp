// The 'data' section (shard_dataset): its keys, declared once with default, range and
// help. shard_dataset reads them (data/shard.cpp, data/source.cpp); the injected label
// noise's keys are read by label_noise_options (data/label_noise.hpp).
#pragma once
#include "config/config.hpp"

namespace sieve {

void add_data_keys(ConfigSchema& s);  // data.*: shard_dataset

}  // namespace sieve
