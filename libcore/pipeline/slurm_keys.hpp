// The 'slurm' section's keys: resources for the job scripts (slurm/*.sh), which read them
// through `--get`; the programs never do. Declared once in pipeline/slurm_keys.cpp.
#pragma once
#include "config/config.hpp"

namespace sieve {

void add_slurm_keys(ConfigSchema& s);  // slurm.*: resources for the job scripts

}  // namespace sieve
