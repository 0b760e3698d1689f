#include "config/sections.hpp"

namespace sieve {

// Keys of the 'scaled' section: the large-batch retraining (tools/train_scaled) and its
// sweep grid. Model/optimizer/schedule keys are the same as pretrain's.
void add_scaled_keys(ConfigSchema& s) {
  // The sweep changes the batch, so the recipe follows it by default: optimizer.lr holds at
  // batch 256 and scales by schedule.scaling (auto) with one warm-up epoch (Goyal et al.),
  // and batches of 4096 and more train with LARS (You et al.); docs/training.md.
  add_trainer_keys(s, "scaled", "resnet18", 30, 256, 0.1, 256, 1.0, 4096);
  s.add_string("scaled.arm", "full",
               "training data: full, filtered (filter /keep) or random (filter /random_keep)",
               {"full", "filtered", "random"});
  s.add_tree("scaled.sweep",
             "sweep grid: key -> list of values (keys: global_batch, arm, seed, weight_decay, "
             "lr, or any scaled.* key path); expanded as a cartesian product, see "
             "docs/training.md");
}

}  // namespace sieve
