#include "config/sections.hpp"

namespace sieve {

// Keys of the 'features' section: extract_features.
void add_features_keys(ConfigSchema& s) {
  s.add_int("features.batch", 256, "samples per forward pass (per rank)", 1);
  s.add_bool("features.test", true, "also extract the test split");
  s.add_int("features.block_samples", 0,
            "samples each rank reads, embeds and writes at a time (0: about 64 MiB of input "
            "samples, a multiple of features.batch): a rank's memory stays one block plus the "
            "model, whatever the dataset's size",
            0);
  s.add_string("features.backend", "cpu", "compute backend of the forward passes: cpu, cuda or ref",
               {"cpu", "cuda", "ref"});
  s.add_string(
      "features.precision", "auto",
      "activation precision of the forward passes: auto (bf16 where native and faster than "
      "fp32), bf16 or "
      "fp32 (features are written in fp32 either way)",
      {"auto", "bf16", "fp32"});
  s.add_string("features.model", "auto",
               "which pretrained model to embed with: early (pretrain/model_early.h5, the "
               "held-out accuracy peak), final (pretrain/model.h5), or auto (early when pretrain "
               "wrote one, else final; the choice is logged and recorded); --model overrides",
               {"auto", "early", "final"});
  s.add_string("features.fold_models", "early",
               "where pretrain wrote cross-fitted fold models (pretrain.folds >= 2): /train/probs "
               "are out-of-fold, each training sample scored by the fold model that never trained "
               "on it, taken at its fold's held-out peak (early) or at the end of its schedule "
               "(final); off: in-sample probabilities of the model above. Features and test "
               "probabilities always come from that model (docs/detection.md)",
               {"early", "final", "off"});
}

}  // namespace sieve
