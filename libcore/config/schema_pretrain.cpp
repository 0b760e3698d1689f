#include "config/sections.hpp"

namespace sieve {

// Keys of the 'pretrain' section: see the owning tool's --help-config.
void add_pretrain_keys(ConfigSchema& s) {
  (void)s;
}

}  // namespace sieve
