// Batch norm (spatial, NHWC) with optional fused ReLU: own kernels, statistics in fp32.
//
// Why not cuDNN's cudnnBatchNormalization*Ex: in cuDNN 9 that API is deprecated, its fused
// BN+activation path is documented for half-precision persistent mode only, its persistent
// mode reduces with atomics (run-to-run differences), and its running variance update would
// be a second implementation of update_running_stats to keep in step. BN is memory-bound, so
// own kernels cost little: one read of x for the statistics, one read + write to normalise.
//
// Layout: x is [m, c] with m = n*h*w rows (NHWC). The kernels tile it as blocks of 32
// channels x 8 row lanes; a thread walks its channel down every (8 * gridDim.y)-th row, so a
// warp reads 32 consecutive channels of one row (coalesced).
//
// Statistics are deterministic: each thread accumulates sums shifted by its first value
// (no cancellation in var = E[(x-K)^2] - E[x-K]^2), partial (count, mean, M2) triples are
// merged with Chan's formula in a fixed tree inside the block; a second kernel merges the
// blocks' partials in double, 32 lanes per channel each taking a fixed stride of blocks, then
// a fixed tree over the lanes (a serial loop per channel over hundreds of partials would cost
// ~100 us per call in load latency). Same for the backward sums. No atomics anywhere.
#include <algorithm>
#include <memory>

#include "cuda/backend_cuda.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/dtype.cuh"

namespace sieve::cuda {
namespace {

constexpr int kTileC = 32, kLanes = 8, kFinishLanes = 32;

// Chan et al.: merge (nb, mb, m2b) into (na, ma, m2a); either side may be empty.
template <typename F>
__device__ __forceinline__ void merge_moments(F& na, F& ma, F& m2a, F nb, F mb, F m2b) {
  if (nb == F(0)) return;
  const F n = na + nb, delta = mb - ma, wb = nb / n;
  ma += delta * wb;
  m2a += m2b + delta * delta * na * wb;
  na = n;
}

// Per block: (count, mean, M2) of its rows for each of its 32 channels, into
// part[(blockIdx.y * 3 + {0,1,2}) * c + ch].
template <typename T>
__global__ void bn_moments_kernel(const T* __restrict__ x, int m, int c, float* __restrict__ part) {
  __shared__ float sn[kLanes][kTileC], smean[kLanes][kTileC], sm2[kLanes][kTileC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int ch = blockIdx.x * kTileC + tx;
  const int row_step = gridDim.y * kLanes;
  float cnt = 0.f, mean = 0.f, m2 = 0.f;
  if (ch < c) {
    const int first = blockIdx.y * kLanes + ty;
    if (first < m) {
      const float shift = to_float(x[size_t(first) * c + ch]);
      float s1 = 0.f, s2 = 0.f;
#pragma unroll 4
      for (int r = first; r < m; r += row_step) {
        const float v = to_float(x[size_t(r) * c + ch]) - shift;
        s1 += v;
        s2 = fmaf(v, v, s2);
        cnt += 1.f;
      }
      mean = shift + s1 / cnt;
      m2 = fmaxf(s2 - s1 * (s1 / cnt), 0.f);
    }
  }
  sn[ty][tx] = cnt, smean[ty][tx] = mean, sm2[ty][tx] = m2;
  __syncthreads();
  for (int half = kLanes / 2; half > 0; half /= 2) {
    if (ty < half) {
      float n = sn[ty][tx], mu = smean[ty][tx], q = sm2[ty][tx];
      merge_moments(n, mu, q, sn[ty + half][tx], smean[ty + half][tx], sm2[ty + half][tx]);
      sn[ty][tx] = n, smean[ty][tx] = mu, sm2[ty][tx] = q;
    }
    __syncthreads();
  }
  if (ty == 0 && ch < c) {
    part[(size_t(blockIdx.y) * 3 + 0) * c + ch] = sn[0][tx];
    part[(size_t(blockIdx.y) * 3 + 1) * c + ch] = smean[0][tx];
    part[(size_t(blockIdx.y) * 3 + 2) * c + ch] = sm2[0][tx];
  }
}

// Block (32 channels x 32 lanes): merge the row blocks' moments in double, then
//   mean, inv = 1/sqrt(var + eps) saved for backward; scale = gamma * inv for normalising;
//   running stats updated exactly as update_running_stats (nn/backend_impl.hpp).
__global__ void bn_finish_moments_kernel(const float* __restrict__ part, int blocks, int c, int m,
                                         const float* __restrict__ gamma, float eps, float momentum,
                                         float* __restrict__ mean_out, float* __restrict__ inv_out,
                                         float* __restrict__ scale, float* __restrict__ run_mean,
                                         float* __restrict__ run_var) {
  __shared__ double sn[kFinishLanes][kTileC], smean[kFinishLanes][kTileC],
      sm2[kFinishLanes][kTileC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int ch = blockIdx.x * kTileC + tx;
  double n = 0, mean = 0, m2 = 0;
  if (ch < c)
    for (int b = ty; b < blocks; b += kFinishLanes)
      merge_moments<double>(n, mean, m2, part[(size_t(b) * 3 + 0) * c + ch],
                            part[(size_t(b) * 3 + 1) * c + ch], part[(size_t(b) * 3 + 2) * c + ch]);
  sn[ty][tx] = n, smean[ty][tx] = mean, sm2[ty][tx] = m2;
  __syncthreads();
  for (int half = kFinishLanes / 2; half > 0; half /= 2) {
    if (ty < half) {
      n = sn[ty][tx], mean = smean[ty][tx], m2 = sm2[ty][tx];
      merge_moments<double>(n, mean, m2, sn[ty + half][tx], smean[ty + half][tx],
                            sm2[ty + half][tx]);
      sn[ty][tx] = n, smean[ty][tx] = mean, sm2[ty][tx] = m2;
    }
    __syncthreads();
  }
  if (ty != 0 || ch >= c) return;
  const float meanf = float(smean[0][tx]), varf = float(sm2[0][tx] / m);
  const double inv = 1.0 / sqrt(double(varf) + eps);
  mean_out[ch] = meanf;
  inv_out[ch] = float(inv);
  scale[ch] = float(double(gamma[ch]) * inv);
  const double unbias = m > 1 ? double(m) / (m - 1) : 1.0;
  run_mean[ch] = float((1.0 - momentum) * run_mean[ch] + momentum * double(meanf));
  run_var[ch] = float((1.0 - momentum) * run_var[ch] + momentum * double(varf) * unbias);
}

// Eval mode: normalise with the running statistics.
__global__ void bn_eval_coefficients_kernel(const float* __restrict__ gamma,
                                            const float* __restrict__ run_mean,
                                            const float* __restrict__ run_var, float eps, int c,
                                            float* __restrict__ mean_out,
                                            float* __restrict__ scale) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  mean_out[ch] = run_mean[ch];
  scale[ch] = float(double(gamma[ch]) / sqrt(double(run_var[ch]) + eps));
}

// y = (x - mean) * scale + beta, then max(., 0) if relu.
template <typename T>
__global__ void bn_normalize_kernel(const T* __restrict__ x, int m, int c,
                                    const float* __restrict__ mean, const float* __restrict__ scale,
                                    const float* __restrict__ beta, bool relu, T* __restrict__ y) {
  const int ch = blockIdx.x * kTileC + threadIdx.x;
  if (ch >= c) return;
  const float mu = mean[ch], a = scale[ch], b = beta[ch];
#pragma unroll 4
  for (int r = blockIdx.y * kLanes + threadIdx.y; r < m; r += gridDim.y * kLanes) {
    const size_t i = size_t(r) * c + ch;
    float o = fmaf(to_float(x[i]) - mu, a, b);
    if (relu) o = o > 0.f ? o : 0.f;
    y[i] = from_float<T>(o);
  }
}

// The gradient reaching BN's output: dy, masked by the fused ReLU (y > 0).
template <typename T>
__device__ __forceinline__ float bn_grad(const T* y, const T* dy, size_t i, bool relu) {
  const float g = to_float(dy[i]);
  return relu && !(to_float(y[i]) > 0.f) ? 0.f : g;
}

// Per block: sum g and sum g * (x - mean) per channel, into part[(blockIdx.y*2 + {0,1})*c + ch].
template <typename T>
__global__ void bn_backward_sums_kernel(const T* __restrict__ x, const T* __restrict__ y,
                                        const T* __restrict__ dy, int m, int c, bool relu,
                                        const float* __restrict__ mean, float* __restrict__ part) {
  __shared__ float s_g[kLanes][kTileC], s_gx[kLanes][kTileC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int ch = blockIdx.x * kTileC + tx;
  float sg = 0.f, sgx = 0.f;
  if (ch < c) {
    const float mu = mean[ch];
#pragma unroll 4
    for (int r = blockIdx.y * kLanes + ty; r < m; r += gridDim.y * kLanes) {
      const size_t i = size_t(r) * c + ch;
      const float g = bn_grad(y, dy, i, relu);
      sg += g;
      sgx = fmaf(g, to_float(x[i]) - mu, sgx);
    }
  }
  s_g[ty][tx] = sg, s_gx[ty][tx] = sgx;
  __syncthreads();
  for (int half = kLanes / 2; half > 0; half /= 2) {
    if (ty < half) {
      s_g[ty][tx] += s_g[ty + half][tx];
      s_gx[ty][tx] += s_gx[ty + half][tx];
    }
    __syncthreads();
  }
  if (ty == 0 && ch < c) {
    part[(size_t(blockIdx.y) * 2 + 0) * c + ch] = s_g[0][tx];
    part[(size_t(blockIdx.y) * 2 + 1) * c + ch] = s_gx[0][tx];
  }
}

// Block (32 channels x 32 lanes): sum the row blocks' partials in double (fixed lanes, fixed
// tree), then dgamma += sum g*xhat, dbeta += sum g, and the coefficients of
// dx = gamma*inv*(g - sum_g/m - xhat*sum_gxhat/m) = k_g*g + k_x*(x - mean) + k_0.
__global__ void bn_finish_backward_kernel(const float* __restrict__ part, int blocks, int c, int m,
                                          const float* __restrict__ gamma,
                                          const float* __restrict__ inv, float* __restrict__ dgamma,
                                          float* __restrict__ dbeta, float* __restrict__ coef) {
  __shared__ double s_g[kFinishLanes][kTileC], s_gx[kFinishLanes][kTileC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int ch = blockIdx.x * kTileC + tx;
  double sg = 0, sgx = 0;
  if (ch < c)
    for (int b = ty; b < blocks; b += kFinishLanes) {
      sg += part[(size_t(b) * 2 + 0) * c + ch];
      sgx += part[(size_t(b) * 2 + 1) * c + ch];
    }
  s_g[ty][tx] = sg, s_gx[ty][tx] = sgx;
  __syncthreads();
  for (int half = kFinishLanes / 2; half > 0; half /= 2) {
    if (ty < half) {
      s_g[ty][tx] += s_g[ty + half][tx];
      s_gx[ty][tx] += s_gx[ty + half][tx];
    }
    __syncthreads();
  }
  if (ty != 0 || ch >= c) return;
  sg = s_g[0][tx], sgx = s_gx[0][tx];
  const double iv = inv[ch], sgxhat = sgx * iv, k = double(gamma[ch]) * iv;
  dgamma[ch] += float(sgxhat);
  dbeta[ch] += float(sg);
  coef[ch] = float(k);                         // k_g
  coef[c + ch] = float(-k * iv * sgxhat / m);  // k_x
  coef[2 * c + ch] = float(-k * sg / m);       // k_0
}

template <typename T>
__global__ void bn_backward_dx_kernel(const T* __restrict__ x, const T* __restrict__ y,
                                      const T* __restrict__ dy, int m, int c, bool relu,
                                      const float* __restrict__ mean,
                                      const float* __restrict__ coef, T* __restrict__ dx) {
  const int ch = blockIdx.x * kTileC + threadIdx.x;
  if (ch >= c) return;
  const float mu = mean[ch], kg = coef[ch], kx = coef[c + ch], k0 = coef[2 * c + ch];
#pragma unroll 4
  for (int r = blockIdx.y * kLanes + threadIdx.y; r < m; r += gridDim.y * kLanes) {
    const size_t i = size_t(r) * c + ch;
    const float g = bn_grad(y, dy, i, relu);
    dx[i] = from_float<T>(fmaf(kg, g, fmaf(kx, to_float(x[i]) - mu, k0)));
  }
}

class CudaBatchNorm final : public nn::BatchNormOp {
 public:
  CudaBatchNorm(CudaBackend& be, int n, int c, int h, int w, bool relu, float momentum, float eps)
      : be_(be),
        m_(n * h * w),
        c_(c),
        relu_(relu),
        momentum_(momentum),
        eps_(eps),
        stats_(be),
        part_(be) {
    SIEVE_ASSERT(m_ > 0 && c_ > 0, "batch norm over ", m_, " rows of ", c_, " channels");
    // Enough blocks to fill the GPU (8 of 256 threads per SM), each lane keeping >= 8 rows.
    const int tiles_c = (c_ + kTileC - 1) / kTileC;
    const int max_rows = std::max(1, m_ / (kLanes * 8));
    row_blocks_ = std::clamp(8 * be.sm_count() / tiles_c, 1, max_rows);
    grid_ = dim3(tiles_c, row_blocks_);
    // mean, inv, scale (forward); the three dx coefficients (backward).
    stats_.ensure(6 * size_t(c_) * sizeof(float));
    part_.ensure(3 * size_t(row_blocks_) * c_ * sizeof(float));
  }

  void forward(const nn::Act* x, const float* gamma, const float* beta, float* run_mean,
               float* run_var, nn::Act* y, bool training) override {
    if (training) {
      dispatch_dtype(be_.dtype(), [&](auto tag) {
        using T = decltype(tag);
        bn_moments_kernel<T><<<grid_, dim3(kTileC, kLanes), 0, be_.stream()>>>(
            static_cast<const T*>(x), m_, c_, part_.as<float>());
      });
      SIEVE_CUDA_CHECK_LAUNCH();
      bn_finish_moments_kernel<<<grid_.x, dim3(kTileC, kFinishLanes), 0, be_.stream()>>>(
          part_.as<float>(), row_blocks_, c_, m_, gamma, eps_, momentum_, mean(), inv(), scale(),
          run_mean, run_var);
      SIEVE_CUDA_CHECK_LAUNCH();
    } else {
      bn_eval_coefficients_kernel<<<(c_ + 127) / 128, 128, 0, be_.stream()>>>(
          gamma, run_mean, run_var, eps_, c_, mean(), scale());
      SIEVE_CUDA_CHECK_LAUNCH();
    }
    dispatch_dtype(be_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      bn_normalize_kernel<T><<<grid_, dim3(kTileC, kLanes), 0, be_.stream()>>>(
          static_cast<const T*>(x), m_, c_, mean(), scale(), beta, relu_, static_cast<T*>(y));
    });
    SIEVE_CUDA_CHECK_LAUNCH();
    trained_ = training;
  }

  void backward(const nn::Act* x, const nn::Act* y, const nn::Act* dy, const float* gamma,
                nn::Act* dx, float* dgamma, float* dbeta) override {
    SIEVE_ASSERT(trained_, "batch norm backward without a training forward");
    dispatch_dtype(be_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      bn_backward_sums_kernel<T><<<grid_, dim3(kTileC, kLanes), 0, be_.stream()>>>(
          static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(dy), m_, c_,
          relu_, mean(), part_.as<float>());
    });
    SIEVE_CUDA_CHECK_LAUNCH();
    bn_finish_backward_kernel<<<grid_.x, dim3(kTileC, kFinishLanes), 0, be_.stream()>>>(
        part_.as<float>(), row_blocks_, c_, m_, gamma, inv(), dgamma, dbeta, coef());
    SIEVE_CUDA_CHECK_LAUNCH();
    dispatch_dtype(be_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      bn_backward_dx_kernel<T><<<grid_, dim3(kTileC, kLanes), 0, be_.stream()>>>(
          static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(dy), m_, c_,
          relu_, mean(), coef(), static_cast<T*>(dx));
    });
    SIEVE_CUDA_CHECK_LAUNCH();
  }

 private:
  float* mean() const { return stats_.as<float>(); }
  float* inv() const { return stats_.as<float>() + c_; }
  float* scale() const { return stats_.as<float>() + 2 * size_t(c_); }
  float* coef() const { return stats_.as<float>() + 3 * size_t(c_); }

  CudaBackend& be_;
  int m_, c_;
  bool relu_;
  float momentum_, eps_;
  int row_blocks_ = 1;
  dim3 grid_;
  DeviceScratch stats_;  // [6, c] fp32: mean, inv std, scale, dx coefficients
  DeviceScratch part_;   // [row_blocks, 3, c] fp32: per-block partial moments / sums
  bool trained_ = false;
};

}  // namespace

std::unique_ptr<nn::BatchNormOp> make_batchnorm(CudaBackend& be, int n, int c, int h, int w,
                                                bool fuse_relu, float momentum, float eps) {
  return std::make_unique<CudaBatchNorm>(be, n, c, h, w, fuse_relu, momentum, eps);
}

}  // namespace sieve::cuda
