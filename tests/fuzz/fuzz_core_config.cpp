// Fuzz the YAML config loader against the full pipeline schema: any input must either load
// or raise sieve::Error (UsageError) — never crash, hang or throw anything else.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "pipeline/schema.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  const sieve::ConfigSchema& schema = sieve::pipeline_schema();
  try {
    sieve::Config cfg = sieve::Config::from_yaml_text(schema, text, "fuzz");
    // A config that loaded must round-trip through its resolved YAML.
    sieve::Config again = sieve::Config::from_yaml_text(schema, cfg.to_yaml(), "fuzz-roundtrip");
    if (again.to_yaml() != cfg.to_yaml()) __builtin_trap();
  } catch (const sieve::Error&) {
  }
  // The same text as a --set override value for a few typed keys.
  for (const char* key : {"run.seed", "run.dir", "data.synthetic.label_noise"}) {
    try {
      sieve::Config::load(schema, "", {std::string(key) + "=" + text});
    } catch (const sieve::Error&) {
    }
  }
  return 0;
}
