// The op interface: what a compute backend provides to the layers.
//
// A backend instance is (implementation, activation dtype): backend("cpu", DType::bf16) is the
// oneDNN backend computing in bf16. It owns memory on its device (Memory), and is a factory
// of op objects. An op object is created once per layer instance for one shape and may cache
// whatever it needs between calls (oneDNN primitives, cuDNN algorithms, workspaces, saved
// batch statistics, reordered or down-cast weights); layers re-create it when the batch size
// changes. The backends a program has are listed in ONE place, backend_registry.cpp (backends
// outside nn, such as cuda, register themselves there: backend_registry.hpp).
//
// Conventions shared by every backend (and checked against the fp32 "ref" backend in tests
// over backend x dtype, tests/support/op_suite.hpp):
//   * every pointer is memory of the backend's device();
//   * activations and their gradients ("Act" pointers, void*) are of the backend's dtype();
//     parameters, parameter gradients and BN statistics are ALWAYS fp32 (master weights): a
//     bf16 backend casts weights down inside the op and accumulates weight gradients in fp32;
//   * activations are NHWC: element (n, c, h, w) at ((n*H + h)*W + w)*C + c;
//   * conv weights are OIHW (torchvision), linear weights [out, in] (row-major);
//   * "backward" writes activation gradients (overwrite) and ACCUMULATES (+=) parameter
//     gradients, so the flat gradient buffer needs no scratch copy per layer;
//   * ops are deterministic for a fixed thread count (no atomics in reductions) on the CPU;
//   * calls may be asynchronous on a device (one stream per backend); the Memory copies to
//     the host synchronise;
//   * backends and ops are not thread-safe (primitive caches): use a model from one thread
//     at a time; parallelism is inside each op (OpenMP / oneDNN threads / the GPU).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/sgd.hpp"
#include "nn/tensor.hpp"

namespace sieve {
class Comm;
}

namespace sieve::nn {

struct ConvShape {
  int n, c, h, w;  // input
  int k, r, s;     // output channels, kernel height, width
  int stride, pad;
  int oh() const { return (h + 2 * pad - r) / stride + 1; }
  int ow() const { return (w + 2 * pad - s) / stride + 1; }
};

struct PoolShape {  // max pooling, square kernel
  int n, c, h, w;
  int kernel, stride, pad;
  int oh() const { return (h + 2 * pad - kernel) / stride + 1; }
  int ow() const { return (w + 2 * pad - kernel) / stride + 1; }
};

using Act = void;  // an activation buffer of the backend's dtype (documentation only)

// y = conv(x, w), no bias (ResNet convs are followed by BN).
class ConvOp {
 public:
  virtual ~ConvOp() = default;
  virtual void forward(const Act* x, const float* w, Act* y) = 0;             // x NHWC, w OIHW
  virtual void backward_data(const Act* dy, const float* w, Act* dx) = 0;     // dx =
  virtual void backward_weights(const Act* x, const Act* dy, float* dw) = 0;  // dw +=
};

// Batch norm over (N, H, W) per channel, optionally fused with a following ReLU. Statistics
// in fp32 whatever the activation dtype.
class BatchNormOp {
 public:
  virtual ~BatchNormOp() = default;
  // training: normalise with batch statistics (biased variance), save them for backward and
  // update running stats: r = (1-momentum)*r + momentum*batch (variance unbiased, M/(M-1)).
  // eval: normalise with running stats.
  virtual void forward(const Act* x, const float* gamma, const float* beta, float* run_mean,
                       float* run_var, Act* y, bool training) = 0;
  // After a training forward on the same x. y is that forward's output (for the fused ReLU
  // mask). dx =, dgamma +=, dbeta +=.
  virtual void backward(const Act* x, const Act* y, const Act* dy, const float* gamma, Act* dx,
                        float* dgamma, float* dbeta) = 0;
};

class MaxPoolOp {
 public:
  virtual ~MaxPoolOp() = default;
  virtual void forward(const Act* x, Act* y, bool training) = 0;
  // After a training forward on the same x; ties go to the first maximum in window order.
  virtual void backward(const Act* x, const Act* dy, Act* dx) = 0;  // dx =
};

// y[n, out] = x[n, in] * W^T + b.
class LinearOp {
 public:
  virtual ~LinearOp() = default;
  virtual void forward(const Act* x, const float* w, const float* b, Act* y) = 0;
  // dx = dy * W (skipped if dx is null), dw += dy^T x, db += sum_n dy.
  virtual void backward(const Act* x, const Act* dy, const float* w, Act* dx, float* dw,
                        float* db) = 0;
};

// A device's own data-parallel reduction of the flat gradient buffer (NCCL on cuda), for the
// device-resident parameter home (train/param_home.hpp). The protocol of train/grad_sync.hpp:
// arm() at the start of the step's last backward, ready(offset, count) from the model's
// grad-ready hook (the range's gradient kernels are queued), finish() once backward is done:
// every piece has been summed over the ranks before this backend's next op runs (a device
// reducer may return before the sums exist, ordering the backend's stream after them).
class DeviceReducer {
 public:
  virtual ~DeviceReducer() = default;
  virtual void arm() = 0;
  virtual void ready(size_t offset, size_t count) = 0;
  virtual void finish() = 0;
  virtual size_t num_buckets() const = 0;
  // Reductions started so far, and of those, by ready() while backward still ran.
  virtual int64_t messages() const = 0;
  virtual int64_t started_early() const = 0;
  virtual double bytes() const = 0;  // payload of those reductions (per rank)
};

class Backend : public Memory {
 public:
  virtual std::string name() const = 0;  // registry name: "cpu", "ref", "cuda"
  virtual DType dtype() const = 0;       // activation dtype of every op it makes
  // Device memory (Memory): allocate/release/to_device/to_host/fill_zero, device().

  virtual std::unique_ptr<ConvOp> conv2d(const ConvShape& s) = 0;
  virtual std::unique_ptr<BatchNormOp> batchnorm(int n, int c, int h, int w, bool fuse_relu,
                                                 float momentum, float eps) = 0;
  virtual std::unique_ptr<MaxPoolOp> maxpool(const PoolShape& s) = 0;
  virtual std::unique_ptr<LinearOp> linear(int n, int in, int out) = 0;

  // Elementwise and small ops on `count` activations.
  virtual void relu_forward(const Act* x, Act* y, size_t count) = 0;
  virtual void relu_backward(const Act* y, const Act* dy, Act* dx, size_t count) = 0;
  virtual void add(const Act* a, const Act* b, Act* y, size_t count) = 0;  // y = a + b
  // Global average pool: x [n, hw, c] (NHWC) -> y [n, c]; backward spreads dy/hw.
  virtual void avgpool_forward(const Act* x, Act* y, int n, int c, int hw) = 0;
  virtual void avgpool_backward(const Act* dy, Act* dx, int n, int c, int hw) = 0;

  // The model's edges, where host fp32 meets device activations:
  // a host fp32 NCHW batch -> activations NHWC on the device (cast to dtype());
  virtual void load_input(const float* host_nchw, Act* y, int n, int c, int h, int w) = 0;
  // activations <-> host fp32 (logits and features out, dlogits in), `count` elements.
  virtual void act_to_host(const Act* x, float* host, size_t count) = 0;
  virtual void act_from_host(const float* host, Act* y, size_t count) = 0;

  // fp32 vectors on the device (parameters, gradients): y += a * x.
  virtual void axpy(float a, const float* x, float* y, size_t count) = 0;

  // The optimizer step where the parameters live (the device-resident parameter home,
  // train/param_home.hpp); the element arithmetic is nn/sgd.hpp's, `terms` and `norms` are
  // host arrays, the buffers this backend's memory.
  // The sum of x[0, count) in double: the non-finite check of the reduced gradients.
  virtual double sum(const float* x, size_t count) = 0;
  // nn::sgd_norms_host on this backend's buffers (norms come back to the host).
  virtual void sgd_norms(const float* params, const float* grads, const SgdTerm* terms, size_t n,
                         double* norms) = 0;
  // nn::sgd_apply_host over [0, total) on this backend's buffers.
  virtual void sgd_apply(const SgdBuffers& b, size_t total, const SgdTerm* terms, size_t n,
                         const SgdStep& s) = 0;
  // This backend's own gradient reduction over `comm` of grads[0, total), in pieces cut at
  // `cuts` (ascending, 0 .. total), a piece complete once the `covered` ranges in it are
  // ready; or null where the host's Comm can reduce this backend's memory in place (the host
  // backends: the trainer then runs its own bucket reducer on it).
  virtual std::unique_ptr<DeviceReducer> device_reducer(
      const Comm& comm, float* grads, size_t total, const std::vector<size_t>& cuts,
      const std::vector<std::pair<size_t, size_t>>& covered) = 0;
};

// The registry (backend_registry.cpp): "cpu" (oneDNN + OpenBLAS; bf16 native with
// AVX512-BF16 / AMX, emulated elsewhere), "ref" (naive loops; its bf16 rounds every
// activation and convolution weight to bf16 and computes in fp32/double: the bf16 semantics) and
// "cuda" (cuDNN + cuBLAS, in builds with CUDA). Instances are process-wide singletons per (name,
// dtype). Throws UsageError naming the backend (and dtype) if unknown, not built, or not supported
// by this machine (no GPU, a CPU without bf16).
Backend& backend(const std::string& name, DType dtype = DType::f32);
std::vector<std::string> backend_names();
// Whether backend(name, dtype) would work on this machine; `why` (if non-null) says why not.
// `native`: only where the hardware computes the dtype natively (what precision auto wants),
// not by emulation.
bool backend_supports(const std::string& name, DType dtype, bool native = false,
                      std::string* why = nullptr);
// Whether bf16 is native on this machine AND faster than fp32 there: what precision auto
// picks bf16 by. Native is not enough: on a CPU with AVX512-BF16 but no AMX, bf16
// convolutions can run at half fp32's speed (docs/engine.md), so the cpu backend measures
// once per process where there is no AMX. `why` (if non-null) says why not.
bool backend_bf16_faster(const std::string& name, std::string* why = nullptr);

struct ModelSpec;
// One training step of a network (forward in training mode, then backward) in each activation
// dtype: CPU time of this process, the best of a few interleaved repetitions after a warm-up.
struct StepTimes {
  double fp32_ms = 0, bf16_ms = 0;
};
// Where a backend's bf16 speed differs by network, not only by machine, it times one training
// step of `spec` (its backend field ignored) at `batch` samples in each dtype and returns true.
// The cpu backend does: with AMX, oneDNN's bf16 runs ResNet's wide layers on the tile units
// several times fp32's speed, but on a narrow network the conversions and reorders around
// them cost more than they save (docs/engine.md). False where the backend has no such
// measurement (ref, cuda): backend_bf16_faster decides alone. Costs a few steps of the network.
bool backend_time_training_step(const std::string& name, const ModelSpec& spec, int batch,
                                StepTimes* out);

// The `precision` key of the training and features sections: "auto" | "bf16" | "fp32".
// auto: bf16 where backend_bf16_faster(name) and fp32 elsewhere (then `note`, if non-null,
// gets one line saying why: no native bf16, or bf16 measured slower). bf16 where the hardware has
// no native bf16 (the backend emulates it): bf16, and `note` says it is emulated. bf16 on a backend
// or machine without it at all (cuda without compute capability 8.0): UsageError naming `key`, the
// backend and why. The environment variable SIEVE_PRECISION_AUTO=bf16|fp32 makes auto
// resolve as on the other kind of CPU (bf16 emulated where not native): a test seam, so that
// one machine runs the suite as a bf16 CPU and as an AVX2 one would.
// `per_network` (if non-null) is set to whether the answer is bf16 by auto alone, on a backend
// that can time networks (backend_time_training_step): the trainer then times its own network
// and may take fp32 after all (train/precision.hpp).
DType resolve_precision(const std::string& precision, const std::string& backend_name,
                        const std::string& key, std::string* note = nullptr,
                        bool* per_network = nullptr);

}  // namespace sieve::nn
