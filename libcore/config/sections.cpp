#include "config/sections.hpp"

#include "io/h5.hpp"

namespace sieve {

void add_run_keys(ConfigSchema& s) {
  s.add_string("run.name", "sieve", "name of the run (used in job names and reports)");
  s.add_string("run.dir", "runs/sieve", "directory that holds every stage's outputs");
  s.add_int("run.seed", 1234, "master random seed (every stage derives its own from it)", 0);
}

RunPaths run_paths(const Config& cfg) {
  return RunPaths{cfg.get_string("run.dir")};
}

std::optional<Config> stored_config(const std::string& path, const ConfigSchema& schema) {
  try {
    h5::File f = h5::File::open(path);
    if (!f.has_attr("/", "config")) return std::nullopt;
    return Config::from_yaml_text(schema, f.attr_string("/", "config"), path);
  } catch (const std::exception&) {
    return std::nullopt;  // no file there, or a config of another schema
  }
}

}  // namespace sieve
