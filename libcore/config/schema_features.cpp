#include "config/sections.hpp"

namespace sieve {

// Keys of the 'features' section: see the owning tool's --help-config.
void add_features_keys(ConfigSchema& s) {
  (void)s;
}

}  // namespace sieve
