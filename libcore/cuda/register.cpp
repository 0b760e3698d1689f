// Enters the CUDA backend into nn's registry when the program starts. Nothing calls into this
// file, so it is not part of the sieve_cuda archive (the linker would drop it): CMake compiles
// it as an object library and puts the object on the link line of every program that links
// sieve_nn (libcore/CMakeLists.txt).
#include "cuda/backend_cuda.hpp"
#include "nn/backend_registry.hpp"

namespace sieve::cuda {
namespace {

// bf16_faster null: bf16 is native only from compute capability 8.0, and there always faster;
// time_training_step null: CPU time does not measure kernels that run on the GPU.
[[maybe_unused]] const bool registered = [] {
  nn::register_backend({"cuda", &make_cuda_backend, &cuda_backend_supports, nullptr, nullptr});
  return true;
}();

}  // namespace
}  // namespace sieve::cuda
