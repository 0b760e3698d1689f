// The ONE place that knows which backends a program has. The host backends are nn's own; an
// optional backend registers itself (backend_registry.hpp), so nn never links it. The registry
// names the optional ones even where they are absent, so that asking for one says what is
// missing instead of "unknown"; whether this build compiled CUDA at all (which changes that
// message) is the engine's only #ifdef.
#include "nn/backend_registry.hpp"

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "nn/backend_impl.hpp"
#include "util/error.hpp"

namespace sieve::nn {

namespace {

#ifdef SIEVE_HAVE_CUDA
constexpr const char* kCudaMissing =
    "this program does not link the CUDA backend (link sieve_nn, which registers every backend "
    "the build has, not sieve_nn_base)";
#else
constexpr const char* kCudaMissing =
    "this build has no CUDA backend (configure with nvcc on PATH, SIEVE_ENABLE_CUDA)";
#endif

struct Entry {
  BackendEntry backend;  // make == nullptr: named, but not in this program
  const char* missing;   // why not, where make == nullptr
};

struct Registry {
  std::mutex mu;
  std::vector<Entry> entries{
      {{"cpu", &make_cpu_backend, &cpu_backend_supports, &cpu_bf16_faster, &cpu_time_training_step},
       nullptr},
      {{"ref", &make_ref_backend, &ref_backend_supports, nullptr, nullptr}, nullptr},
      {{"cuda", nullptr, nullptr, nullptr, nullptr}, kCudaMissing},
  };
};

Registry& registry() {
  static Registry r;
  return r;
}

// A copy, so that a registration while it is used cannot move it.
Entry entry(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const Entry& e : r.entries)
    if (name == e.backend.name) return e;
  std::string known;
  for (const Entry& e : r.entries)
    known += (known.empty() ? "" : ", ") + std::string(e.backend.name);
  throw UsageError(cat("nn backend '", name, "': unknown; expected one of ", known));
}

bool supports(const Entry& e, DType dtype, bool native, std::string* why) {
  if (!e.backend.make) {
    if (why) *why = e.missing;
    return false;
  }
  return e.backend.supports(dtype, native, why);
}

}  // namespace

void register_backend(const BackendEntry& backend) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (Entry& e : r.entries)
    if (std::string(e.backend.name) == backend.name) {
      e = {backend, nullptr};
      return;
    }
  r.entries.push_back({backend, nullptr});
}

bool backend_supports(const std::string& name, DType dtype, bool native, std::string* why) {
  return supports(entry(name), dtype, native, why);
}

bool backend_bf16_faster(const std::string& name, std::string* why) {
  const Entry e = entry(name);
  if (!supports(e, DType::bf16, true, why)) return false;
  return !e.backend.bf16_faster || e.backend.bf16_faster(why);
}

bool backend_time_training_step(const std::string& name, const ModelSpec& spec, int batch,
                                StepTimes* out) {
  const Entry e = entry(name);
  return e.backend.make && e.backend.time_training_step &&
         e.backend.time_training_step(spec, batch, out);
}

Backend& backend(const std::string& name, DType dtype) {
  static std::mutex mu;
  static std::map<std::pair<std::string, DType>, std::unique_ptr<Backend>> made;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(name, dtype);
  auto it = made.find(key);
  if (it != made.end()) return *it->second;
  const Entry e = entry(name);
  std::string why;
  if (!supports(e, dtype, false, &why))
    throw UsageError(cat("nn backend '", name, "' with ", dtype_name(dtype), ": ", why));
  return *(made[key] = e.backend.make(dtype));
}

std::vector<std::string> backend_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const Entry& e : r.entries) out.push_back(e.backend.name);
  return out;
}

DType resolve_precision(const std::string& precision, const std::string& name,
                        const std::string& key, std::string* note, bool* per_network) {
  if (per_network) *per_network = false;
  if (precision == "fp32") return DType::f32;
  std::string why;
  if (precision == "bf16") {
    if (!backend_supports(name, DType::bf16, false, &why))
      throw UsageError(cat(key, ": bf16 on backend '", name, "': ", why, "; use fp32 or auto"));
    if (note && !backend_supports(name, DType::bf16, true, &why))
      *note = cat(key, ": bf16 emulated: ", why, "; bf16's numerics, not its speed");
    return DType::bf16;
  }
  if (precision != "auto")
    throw UsageError(cat(key, ": expected auto, bf16 or fp32, got '", precision, "'"));
  // What auto means differs between CPUs (bf16 with AVX512-BF16/AMX, fp32 below), so a test
  // suite that passes on one CPU can fail on the other. SIEVE_PRECISION_AUTO=bf16|fp32 makes
  // auto resolve as it would on the other kind of CPU (bf16 emulated where not native), so
  // both behaviours are tested on any machine (tests/CMakeLists.txt runs a suite part so).
  if (const char* forced = std::getenv("SIEVE_PRECISION_AUTO"); forced && *forced) {
    const std::string f = forced;
    if (f != "bf16" && f != "fp32")
      throw UsageError(cat("SIEVE_PRECISION_AUTO: expected bf16 or fp32, got '", f, "'"));
    if (f == "bf16" && !backend_supports(name, DType::bf16, false, &why)) {
      if (note) *note = cat(key, ": auto -> fp32 (SIEVE_PRECISION_AUTO=bf16, but ", why, ")");
      return DType::f32;
    }
    if (note) *note = cat(key, ": auto -> ", f, " (SIEVE_PRECISION_AUTO)");
    return f == "bf16" ? DType::bf16 : DType::f32;
  }
  if (backend_bf16_faster(name, &why)) {
    if (per_network) *per_network = entry(name).backend.time_training_step != nullptr;
    return DType::bf16;
  }
  if (note) *note = cat(key, ": auto -> fp32 (", why, ")");
  return DType::f32;
}

}  // namespace sieve::nn
