// The training sections' keys: `pretrain.*` (the feature extractor), `scaled.*` (the
// large-batch retraining and its sweep), the keys both share (model, optimizer, schedule,
// batch, checkpoints, gradient communication) and `features.*` (extract_features). Declared
// once in train/keys.cpp, with default, range and help, beside their readers
// (read_train_options in train/options.cpp; the programs in train/prog_*.cpp). keys.cpp is
// built into sieve_core, so that every program has the whole schema without linking the
// training code (libcore/CMakeLists.txt).
#pragma once
#include <cstdint>
#include <string>

#include "config/config.hpp"

namespace sieve {

void add_pretrain_keys(ConfigSchema& s);  // pretrain.*: the feature extractor
void add_features_keys(ConfigSchema& s);  // features.*: extract_features
void add_scaled_keys(ConfigSchema& s);    // scaled.*: train_scaled and its sweep
// The keys every training section shares (model, optimizer, schedule, batch, checkpoints,
// gradient communication) under prefix `p`, with the section's own defaults.
void add_trainer_keys(ConfigSchema& s, const std::string& p, const std::string& arch,
                      int64_t epochs, int64_t global_batch, double lr, int64_t ref_batch,
                      double warmup_epochs, int64_t lars_from_batch);

}  // namespace sieve
