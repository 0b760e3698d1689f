// Dotted key paths ("pretrain.optimizer.lr") over nested YAML mappings: the one walker that
// Config::set (splicing into free-form trees), Config::to_yaml (rebuilding the nesting)
// and `--get` (looking a value up) share.
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace sieve {

// "a.b.c" -> {"a", "b", "c"}.
std::vector<std::string> split_key_path(const std::string& path);

// Sets root[a][b][c] = a clone of value, creating the intermediate mappings.
void put_at_key_path(YAML::Node root, const std::string& path, const YAML::Node& value);

// root[a][b][c], or an invalid node (operator bool false) where a part is missing or an
// intermediate node is not a mapping.
YAML::Node find_at_key_path(const YAML::Node& root, const std::string& path);

}  // namespace sieve
