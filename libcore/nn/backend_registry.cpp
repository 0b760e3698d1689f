// The ONE place that knows which backends exist. A new backend (e.g. CUDA) adds its factory
// declaration to backend_impl.hpp and one entry here.
#include <map>
#include <mutex>

#include "nn/backend_impl.hpp"
#include "util/error.hpp"

namespace sieve::nn {

namespace {
struct Entry {
  const char* name;
  std::unique_ptr<Backend> (*make)();
};
const Entry kBackends[] = {
    {"cpu", &make_cpu_backend},
    {"ref", &make_ref_backend},
};
}  // namespace

Backend& backend(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Backend>> made;
  std::lock_guard<std::mutex> lock(mu);
  auto it = made.find(name);
  if (it != made.end()) return *it->second;
  for (const Entry& e : kBackends)
    if (name == e.name) return *(made[name] = e.make());
  std::string known;
  for (const Entry& e : kBackends) known += (known.empty() ? "" : ", ") + std::string(e.name);
  throw UsageError(cat("nn backend '", name, "': unknown; expected one of ", known));
}

std::vector<std::string> backend_names() {
  std::vector<std::string> out;
  for (const Entry& e : kBackends) out.push_back(e.name);
  return out;
}

}  // namespace sieve::nn
