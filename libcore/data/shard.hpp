// The shard_dataset program (tools/shard_dataset.cpp is a thin main around this).
#pragma once
#include "run/tool.hpp"

namespace sieve::data {

// Flags of shard_dataset beyond the common ones.
void add_shard_flags(po::options_description& d);
// The body: open the source named by data.source, write the dataset, print a summary.
void run_shard_dataset(ToolContext& ctx);

}  // namespace sieve::data
