// The SGD update over flat fp32 buffers, as a backend computes it where the parameters live.
//
// train::SgdOptimizer decides WHAT each tensor gets (which tensors decay, LARS trust ratios
// from their norms, momentum, learning rate); this file says HOW the elements are updated,
// once, for every home of the parameters: the host (sgd_norms_host / sgd_apply_host, which
// SgdOptimizer itself runs and the host backends' ops call, so that a backend-driven step on
// the CPU is bitwise the host step) and a device (nn::Backend::sgd_norms / sgd_apply, the
// same passes as kernels: cuda/sgd.cu).
//
// One step over the elements [begin, end), in this order (each element's arithmetic is fixed
// by it):
//   1. g = grads                                   (scratch; grads is left as it is)
//   2. per term:  lars:  g = trust * (g + l2 * w)
//                 l2:    g = g + l2 * w
//                 plain: g unchanged             (elements in no term are plain too)
//   3. v = momentum * v + g ; g = nesterov ? g + momentum * v : v
//   4. per term with decoupled decay: w = w - (lr * decoupled) * w
//   5. w = w - lr * g
#pragma once
#include <cstddef>
#include <cstdint>

namespace sieve::nn {

// One tensor's terms in a step: a contiguous run [offset, offset + count) of the buffers.
struct SgdTerm {
  enum class Kind : uint8_t { plain, l2, lars };
  size_t offset = 0, count = 0;
  Kind kind = Kind::plain;
  float l2 = 0.f;         // l2 and lars: the coefficient of w added to the gradient
  float trust = 1.f;      // lars: eta * |w| / (|g| + l2 * |w|), from the norms (set per step)
  float decoupled = 0.f;  // weight decay applied to w directly (w -= lr * decoupled * w); 0: none
};

// The whole-buffer part of a step.
struct SgdStep {
  float lr = 0.f;
  float momentum = 0.f;
  bool nesterov = false;
};

// The flat buffers of one step (all of one memory: the host, or one backend's device).
struct SgdBuffers {
  float* params = nullptr;
  const float* grads = nullptr;
  float* velocity = nullptr;  // momentum, kept between steps
  // The effective gradient g of the step, overwritten. May be null for a backend's sgd_apply
  // (a device keeps g in registers; the host backends then use a buffer of their own); the
  // host loops (sgd_apply_host) need it.
  float* scratch = nullptr;
};

// The sum of x[0, count) in double, sequentially: the non-finite check of the gradients
// (nn::Backend::sum on the host, and the trainer's homes whose gradients are host copies).
double sum_host(const float* x, size_t count);

// For every lars term i (others: untouched): norms[2i] = |w|, norms[2i+1] = |g| over the
// term's elements (Euclidean, accumulated in double).
void sgd_norms_host(const float* params, const float* grads, const SgdTerm* terms, size_t n,
                    double* norms);
// The step (above) over [begin, end); every term lies inside the range.
void sgd_apply_host(const SgdBuffers& b, size_t begin, size_t end, const SgdTerm* terms, size_t n,
                    const SgdStep& s);

}  // namespace sieve::nn
