// Host launchers of the backend's own kernels (elementwise.cu, pool_kernels.cu). All are
// asynchronous on the backend's stream. T is float or bf16 (dtype.cuh); counts are elements.
#pragma once
#include <cstddef>

#include "cuda/backend_cuda.hpp"

namespace sieve::cuda {

// y = max(x, 0); dx = y > 0 ? dy : 0; y = a + b (fp32 sum, one rounding).
template <typename T>
void launch_relu_forward(const CudaBackend& be, const T* x, T* y, size_t count);
template <typename T>
void launch_relu_backward(const CudaBackend& be, const T* y, const T* dy, T* dx, size_t count);
template <typename T>
void launch_add(const CudaBackend& be, const T* a, const T* b, T* y, size_t count);
// fp32 y += a * x.
void launch_axpy(const CudaBackend& be, float a, const float* x, float* y, size_t count);

// dtype casts between fp32 and T (a plain copy for T = float).
template <typename T>
void launch_cast_from_float(const CudaBackend& be, const float* x, T* y, size_t count);
template <typename T>
void launch_cast_to_float(const CudaBackend& be, const T* x, float* y, size_t count);

// Model input: fp32 NCHW -> T NHWC.
template <typename T>
void launch_nchw_to_nhwc(const CudaBackend& be, const float* x, T* y, int n, int c, int h, int w);

// Conv weights: the seam's fp32 OIHW <-> cuDNN's NHWC filter layout (KRSC = OHWI) in T.
template <typename T>
void launch_oihw_to_ohwi(const CudaBackend& be, const float* w, T* w_ohwi, int k, int c, int r,
                         int s);
// dw_oihw += grad_ohwi (the weight-gradient accumulation of the seam).
template <typename T>
void launch_accumulate_ohwi_into_oihw(const CudaBackend& be, const T* grad_ohwi, float* dw_oihw,
                                      int k, int c, int r, int s);

// Global average pooling over hw positions of NHWC: x [n, hw, c] -> y [n, c], and its
// backward dx[n, p, c] = dy[n, c] / hw.
template <typename T>
void launch_avgpool_forward(const CudaBackend& be, const T* x, T* y, int n, int c, int hw);
template <typename T>
void launch_avgpool_backward(const CudaBackend& be, const T* dy, T* dx, int n, int c, int hw);

}  // namespace sieve::cuda
