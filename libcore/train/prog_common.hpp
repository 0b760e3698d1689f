// What the training programs share (prog_pretrain.cpp, prog_scaled.cpp): the checkpoint-
// directory policy, the stage-output-directory check and the all-rows index list.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "run/tool.hpp"

namespace sieve::train {

// --resume continues from the checkpoints in `dir`; --overwrite removes them; otherwise
// existing checkpoints are an error (never silently mixed with a new run's). `discard`: they
// are known to be of a run whose outputs are gone; remove them as --overwrite would. Collective.
void prepare_checkpoint_dir(const ToolContext& ctx, const std::string& dir, bool resume,
                            bool discard = false);

// Creates the stage's own `levels` trailing directories of `dir`, never those above (a
// mistyped run.dir is an error naming it). Collective.
void make_output_dir(const ToolContext& ctx, const std::filesystem::path& dir, int levels);

// 0, 1, ..., n-1.
std::vector<int64_t> all_indices(int64_t n);

}  // namespace sieve::train
