#include "config/seeds.hpp"

#include "config/config.hpp"
#include "util/error.hpp"
#include "util/hash.hpp"

namespace sieve {

uint64_t derived_seed(const Config& cfg, SeedFor what, const std::string& section) {
  const uint64_t run_seed = uint64_t(cfg.get_int("run.seed"));
  switch (what) {
    case SeedFor::data:
      return hash_combine(run_seed, 0x64617461 /* "data" */);
    case SeedFor::training:
      return 1 + (mix64(run_seed ^ mix64(section.size())) & 0x7ffffffe);
    case SeedFor::embedding:
      return run_seed * 0x9E3779B97F4A7C15ull + 0xE3BEDull;
  }
  SIEVE_ASSERT(false, "unknown SeedFor");
  return 0;
}

}  // namespace sieve
