// The backend registry's door for backends (backend.hpp is the door for their users). nn/ knows
// only its own host backends ("cpu", "ref"); an optional backend lives in its own library, which
// links sieve_nn_base, and registers itself here when its program starts (a static registrar
// that CMake puts on every sieve_nn consumer's link line as an object file; an unreferenced
// archive member would be dropped by the linker). So nn never links the backends: the
// dependency runs one way, from a backend to nn.
#pragma once
#include <memory>
#include <string>

#include "nn/backend.hpp"

namespace sieve::nn {

struct BackendEntry {
  const char* name;  // the registry name: the `backend` config keys' value
  std::unique_ptr<Backend> (*make)(DType);
  // Whether this machine can run it with this dtype (native: in hardware, not emulated);
  // `why` (if non-null) says why not. Never throws.
  bool (*supports)(DType, bool native, std::string* why);
  // Where bf16 is native: whether it is also faster than fp32 (null: always, as on GPUs from
  // compute capability 8.0 and on ref, which is never native).
  bool (*bf16_faster)(std::string* why);
  // Where bf16's speed also depends on the network: times one training step of a network in
  // each dtype (backend_time_training_step); null where it does not.
  bool (*time_training_step)(const ModelSpec& spec, int batch, StepTimes* out);
};

// Adds a backend, or fills the place of an optional backend the registry names but this
// program lacks (backend_names() keeps its order). Safe during static initialisation: the
// registry is built on first use.
void register_backend(const BackendEntry& entry);

}  // namespace sieve::nn
