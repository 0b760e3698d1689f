// The seeds the stages derive from run.seed, the pipeline's master seed, where their own key
// leaves the choice to it. They are written down here once so that a reader finds them in one
// place. The formulas are ad hoc, one per stage as the stages were added, and they stay
// exactly as they are: each one fixes a stage's outputs (the generated dataset and its label
// noise, the initial weights and sample order, the t-SNE start) for every existing config,
// and runs are compared, resumed and swept on those outputs being bitwise reproducible. A
// cleaner derivation would be a new value for every run ever made, for no gain in randomness.
//
// The filter stage uses run.seed itself (cluster/options.cpp: k-means and GMM starts), with no
// derivation.
#pragma once
#include <cstdint>
#include <string>

namespace sieve {

class Config;

enum class SeedFor {
  data,      // the synthetic generator, the splits and (by default) the label noise: used
             // where data.seed is -1 (data_seed, data/source.hpp)
  training,  // a trainer's initial weights, sample order and augmentation: used where
             // <section>.seed is 0 (pretrain, scaled)
  embedding  // t-SNE's initial layout (embed.tsne has no seed key of its own)
};

// run.seed turned into the seed of `what`:
//   data       hash_combine(run.seed, 0x64617461 "data")
//   training   1 + (mix64(run.seed ^ mix64(section.size())) & 0x7ffffffe): it mixes in the
//              *length* of the section name ("pretrain" 8, "scaled" 6), not the name itself;
//              enough to give the two trainers different seeds. In [1, 2^31), so it reads back
//              as a plain integer everywhere (JSON, YAML).
//   embedding  run.seed * 0x9E3779B97F4A7C15 + 0xE3BED (wrapping)
// `section` is read only for `training`.
uint64_t derived_seed(const Config& cfg, SeedFor what, const std::string& section = "");

}  // namespace sieve
