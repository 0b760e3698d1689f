#include "config/sections.hpp"

namespace sieve {

// Keys of the 'report' section: see the owning tool's --help-config.
void add_report_keys(ConfigSchema& s) {
  (void)s;
}

}  // namespace sieve
