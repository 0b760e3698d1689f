// Typed configuration with a schema: YAML file + `--set key.path=value` overrides.
//
// Every key a program understands is declared once in a ConfigSchema with its type,
// default, range and help text. Loading walks the user's YAML: an unknown key, a wrong
// type or an out-of-range value is a sieve::UsageError (exit 2) naming the key path and
// the file (or `--set`) it came from. The resolved Config (defaults + file + overrides)
// round-trips: to_yaml() is written into every output file and next to it, and loading
// that YAML again gives the same Config.
#pragma once
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sieve {

enum class ValueType { Bool, Int, Float, String, IntList, FloatList, StringList, Tree };

struct KeySpec {
  std::string path;  // dotted, e.g. "pretrain.optimizer.lr"
  ValueType type;
  YAML::Node default_value;
  std::string help;
  std::optional<double> min, max;    // inclusive bounds for numbers and list elements
  std::vector<std::string> choices;  // allowed values for strings (empty: any)
};

class ConfigSchema {
 public:
  ConfigSchema& add_bool(const std::string& path, bool def, const std::string& help);
  ConfigSchema& add_int(const std::string& path, int64_t def, const std::string& help,
                        std::optional<double> min = std::nullopt,
                        std::optional<double> max = std::nullopt);
  ConfigSchema& add_float(const std::string& path, double def, const std::string& help,
                          std::optional<double> min = std::nullopt,
                          std::optional<double> max = std::nullopt);
  ConfigSchema& add_string(const std::string& path, const std::string& def,
                           const std::string& help, std::vector<std::string> choices = {});
  ConfigSchema& add_int_list(const std::string& path, std::vector<int64_t> def,
                             const std::string& help, std::optional<double> min = std::nullopt,
                             std::optional<double> max = std::nullopt);
  ConfigSchema& add_float_list(const std::string& path, std::vector<double> def,
                               const std::string& help, std::optional<double> min = std::nullopt,
                               std::optional<double> max = std::nullopt);
  ConfigSchema& add_string_list(const std::string& path, std::vector<std::string> def,
                                const std::string& help);
  // A free-form subtree (e.g. a sweep grid) that the program validates itself.
  ConfigSchema& add_tree(const std::string& path, const std::string& help);
  // A scalar given for the section `section` sets `key` (e.g. `data.label_noise: 0.2` for
  // `data.label_noise.rate`), so that a key that grew into a section keeps its old form.
  ConfigSchema& add_shorthand(const std::string& section, const std::string& key);
  const std::string* shorthand(const std::string& section) const;

  const KeySpec* find(const std::string& path) const;
  // The spec of the Tree key that contains `path`, if any.
  const KeySpec* enclosing_tree(const std::string& path) const;
  bool is_section(const std::string& path) const;  // a prefix of some key
  const std::vector<KeySpec>& keys() const { return keys_; }
  // Human-readable listing for `--help-config`.
  std::string describe() const;

 private:
  ConfigSchema& add(KeySpec spec);
  std::vector<KeySpec> keys_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> shorthands_;  // section -> key
};

class Config {
 public:
  Config() = default;
  // Defaults, then `yaml_file` (may be empty), then each "key.path=value" override in order.
  static Config load(const ConfigSchema& schema, const std::string& yaml_file,
                     const std::vector<std::string>& overrides);
  // Several files layered in order (a later file's keys win; a tree key such as a sweep
  // grid is replaced whole), then the overrides.
  static Config load(const ConfigSchema& schema, const std::vector<std::string>& yaml_files,
                     const std::vector<std::string>& overrides);
  // Parse YAML text (e.g. the `config` attribute of an HDF5 file) against the schema.
  static Config from_yaml_text(const ConfigSchema& schema, const std::string& text,
                               const std::string& origin);

  bool get_bool(const std::string& path) const;
  int64_t get_int(const std::string& path) const;
  double get_float(const std::string& path) const;
  std::string get_string(const std::string& path) const;
  std::vector<int64_t> get_int_list(const std::string& path) const;
  std::vector<double> get_float_list(const std::string& path) const;
  std::vector<std::string> get_string_list(const std::string& path) const;
  YAML::Node get_tree(const std::string& path) const;

  // Set a key programmatically (validated like an override); used by sweeps.
  void set(const std::string& path, const YAML::Node& value, const std::string& origin);

  // The resolved config as YAML; with `section` ("pretrain", "run.seed") only its keys.
  std::string to_yaml(const std::string& section = "") const;
  const ConfigSchema& schema() const { return *schema_; }

 private:
  const KeySpec& spec(const std::string& path, ValueType expected) const;
  const ConfigSchema* schema_ = nullptr;
  std::map<std::string, YAML::Node> values_;  // path -> validated value
};

// Shortest round-trip text of a float ("0.05"), always with a '.' or exponent ("2.0").
std::string format_float(double v);
// [n] as a new node (never `m = n; m = Sequence`: yaml-cpp's assignment writes through).
YAML::Node one_element_list(const YAML::Node& n);

// Validate and normalise one value against its spec; throws UsageError naming `origin`.
YAML::Node validate_value(const KeySpec& spec, const YAML::Node& value, const std::string& origin);

}  // namespace sieve
