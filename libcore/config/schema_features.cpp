#include "config/sections.hpp"

namespace sieve {

// Keys of the 'features' section: extract_features.
void add_features_keys(ConfigSchema& s) {
  s.add_int("features.batch", 256, "samples per forward pass (per rank)", 1);
  s.add_bool("features.test", true, "also extract the test split");
}

}  // namespace sieve
