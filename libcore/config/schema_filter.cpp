#include "config/sections.hpp"

namespace sieve {

// Keys of the 'filter' section: see the owning tool's --help-config.
void add_filter_keys(ConfigSchema& s) {
  (void)s;
}

}  // namespace sieve
