// The ONE place that knows which backends exist (and the only #ifdef of the engine: whether
// this build has the CUDA backend). A new backend adds its factory declaration to
// backend_impl.hpp and one entry here.
#include <cstdlib>
#include <map>
#include <mutex>

#include "nn/backend_impl.hpp"
#include "util/error.hpp"

namespace sieve::nn {

namespace {

#ifndef SIEVE_HAVE_CUDA
// Builds without nvcc: the name is known, so the error says what is missing.
bool cuda_not_built(DType, bool, std::string* why) {
  if (why) *why = "this build has no CUDA backend (configure with nvcc on PATH, SIEVE_ENABLE_CUDA)";
  return false;
}
std::unique_ptr<Backend> make_cuda_not_built(DType) {
  return nullptr;
}
#endif

struct Entry {
  const char* name;
  std::unique_ptr<Backend> (*make)(DType);
  bool (*supports)(DType, bool native, std::string* why);
  // Where bf16 is native: whether it is also faster than fp32 (null: always, as on GPUs
  // from compute capability 8.0 and on ref, which is never native).
  bool (*bf16_faster)(std::string* why);
};
const Entry kBackends[] = {
    {"cpu", &make_cpu_backend, &cpu_backend_supports, &cpu_bf16_faster},
    {"ref", &make_ref_backend, &ref_backend_supports, nullptr},
#ifdef SIEVE_HAVE_CUDA
    {"cuda", &make_cuda_backend, &cuda_backend_supports, nullptr},
#else
    {"cuda", &make_cuda_not_built, &cuda_not_built, nullptr},
#endif
};

const Entry& entry(const std::string& name) {
  for (const Entry& e : kBackends)
    if (name == e.name) return e;
  std::string known;
  for (const Entry& e : kBackends) known += (known.empty() ? "" : ", ") + std::string(e.name);
  throw UsageError(cat("nn backend '", name, "': unknown; expected one of ", known));
}

}  // namespace

bool backend_supports(const std::string& name, DType dtype, bool native, std::string* why) {
  return entry(name).supports(dtype, native, why);
}

bool backend_bf16_faster(const std::string& name, std::string* why) {
  const Entry& e = entry(name);
  if (!e.supports(DType::bf16, true, why)) return false;
  return !e.bf16_faster || e.bf16_faster(why);
}

Backend& backend(const std::string& name, DType dtype) {
  static std::mutex mu;
  static std::map<std::pair<std::string, DType>, std::unique_ptr<Backend>> made;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(name, dtype);
  auto it = made.find(key);
  if (it != made.end()) return *it->second;
  const Entry& e = entry(name);
  std::string why;
  if (!e.supports(dtype, false, &why))
    throw UsageError(cat("nn backend '", name, "' with ", dtype_name(dtype), ": ", why));
  return *(made[key] = e.make(dtype));
}

std::vector<std::string> backend_names() {
  std::vector<std::string> out;
  for (const Entry& e : kBackends) out.push_back(e.name);
  return out;
}

DType resolve_precision(const std::string& precision, const std::string& name,
                        const std::string& key, std::string* note) {
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
  if (backend_bf16_faster(name, &why)) return DType::bf16;
  if (note) *note = cat(key, ": auto -> fp32 (", why, ")");
  return DType::f32;
}

}  // namespace sieve::nn
