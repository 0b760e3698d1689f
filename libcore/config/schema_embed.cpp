#include "config/sections.hpp"

namespace sieve {

// Keys of the 'embed' section: see the owning tool's --help-config.
void add_embed_keys(ConfigSchema& s) {
  (void)s;
}

}  // namespace sieve
