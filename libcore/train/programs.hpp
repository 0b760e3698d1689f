// The bodies of the training programs (tools/pretrain.cpp, tools/extract_features.cpp,
// tools/train_scaled.cpp are thin mains over these). CLI and recipe: docs/training.md.
#pragma once
#include "run/tool.hpp"

namespace sieve::train {

void add_pretrain_flags(po::options_description& d);
void pretrain_main(ToolContext& ctx);

void add_features_flags(po::options_description& d);
void extract_features_main(ToolContext& ctx);

void add_scaled_flags(po::options_description& d);
void train_scaled_main(ToolContext& ctx);

}  // namespace sieve::train
