#include "config/sections.hpp"

namespace sieve {

// Keys of the 'scaled' section: see the owning tool's --help-config.
void add_scaled_keys(ConfigSchema& s) {
  (void)s;
}

}  // namespace sieve
