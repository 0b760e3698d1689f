#include "config/key_path.hpp"

namespace sieve {

std::vector<std::string> split_key_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot == std::string::npos ? dot : dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

void put_at_key_path(YAML::Node root, const std::string& path, const YAML::Node& value) {
  const std::vector<std::string> parts = split_key_path(path);
  YAML::Node cur = root;
  for (size_t t = 0; t + 1 < parts.size(); ++t) cur.reset(cur[parts[t]]);
  cur[parts.back()] = YAML::Clone(value);
}

YAML::Node find_at_key_path(const YAML::Node& root, const std::string& path) {
  YAML::Node cur = YAML::Clone(root);
  for (const std::string& part : split_key_path(path)) {
    if (!cur.IsMap() || !cur[part]) return YAML::Node(YAML::NodeType::Undefined);
    cur.reset(cur[part]);
  }
  return cur;
}

}  // namespace sieve
