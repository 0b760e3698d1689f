#include "config/sections.hpp"

namespace sieve {

// Keys of the 'slurm' section: see the owning tool's --help-config.
void add_slurm_keys(ConfigSchema& s) {
  (void)s;
}

}  // namespace sieve
