// Reference implementations of every op: plain loops, double accumulation, templated on the
// element type so tests can run them in double precision for finite-difference gradient
// checks, and in float (the "ref" backend) as the oracle for the optimised backends.
// Layouts as in backend.hpp: activations NHWC, conv weights OIHW, linear weights [out, in].
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "nn/backend.hpp"

namespace sieve::nn::ref {

inline size_t nhwc(int h, int w, int c, int n, int y, int x, int ch) {
  return ((static_cast<size_t>(n) * h + y) * w + x) * c + ch;
}

template <typename T>
void conv_forward(const ConvShape& s, const T* x, const T* w, T* y) {
  const int oh = s.oh(), ow = s.ow();
  for (int n = 0; n < s.n; ++n)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox)
        for (int k = 0; k < s.k; ++k) {
          double acc = 0;
          for (int c = 0; c < s.c; ++c)
            for (int r = 0; r < s.r; ++r)
              for (int q = 0; q < s.s; ++q) {
                int iy = oy * s.stride - s.pad + r, ix = ox * s.stride - s.pad + q;
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                acc += double(x[nhwc(s.h, s.w, s.c, n, iy, ix, c)]) *
                       double(w[((size_t(k) * s.c + c) * s.r + r) * s.s + q]);
              }
          y[nhwc(oh, ow, s.k, n, oy, ox, k)] = T(acc);
        }
}

template <typename T>
void conv_backward_data(const ConvShape& s, const T* dy, const T* w, T* dx) {
  const int oh = s.oh(), ow = s.ow();
  for (int n = 0; n < s.n; ++n)
    for (int iy = 0; iy < s.h; ++iy)
      for (int ix = 0; ix < s.w; ++ix)
        for (int c = 0; c < s.c; ++c) {
          double acc = 0;
          for (int r = 0; r < s.r; ++r)
            for (int q = 0; q < s.s; ++q) {
              int ty = iy + s.pad - r, tx = ix + s.pad - q;
              if (ty < 0 || tx < 0 || ty % s.stride || tx % s.stride) continue;
              int oy = ty / s.stride, ox = tx / s.stride;
              if (oy >= oh || ox >= ow) continue;
              for (int k = 0; k < s.k; ++k)
                acc += double(dy[nhwc(oh, ow, s.k, n, oy, ox, k)]) *
                       double(w[((size_t(k) * s.c + c) * s.r + r) * s.s + q]);
            }
          dx[nhwc(s.h, s.w, s.c, n, iy, ix, c)] = T(acc);
        }
}

template <typename T>
void conv_backward_weights(const ConvShape& s, const T* x, const T* dy, T* dw) {
  const int oh = s.oh(), ow = s.ow();
  for (int k = 0; k < s.k; ++k)
    for (int c = 0; c < s.c; ++c)
      for (int r = 0; r < s.r; ++r)
        for (int q = 0; q < s.s; ++q) {
          double acc = 0;
          for (int n = 0; n < s.n; ++n)
            for (int oy = 0; oy < oh; ++oy)
              for (int ox = 0; ox < ow; ++ox) {
                int iy = oy * s.stride - s.pad + r, ix = ox * s.stride - s.pad + q;
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                acc += double(x[nhwc(s.h, s.w, s.c, n, iy, ix, c)]) *
                       double(dy[nhwc(oh, ow, s.k, n, oy, ox, k)]);
              }
          dw[((size_t(k) * s.c + c) * s.r + r) * s.s + q] += T(acc);
        }
}

// Batch norm, training mode: m = N*H*W samples per channel; mean/var (biased) written out.
template <typename T>
void bn_forward_train(int m, int c, const T* x, const T* gamma, const T* beta, T* y, T* mean,
                      T* var, double eps, bool relu) {
  for (int ch = 0; ch < c; ++ch) {
    double s = 0, ss = 0;
    for (int i = 0; i < m; ++i) s += double(x[size_t(i) * c + ch]);
    double mu = s / m;
    for (int i = 0; i < m; ++i) {
      double d = double(x[size_t(i) * c + ch]) - mu;
      ss += d * d;
    }
    double v = ss / m, inv = 1.0 / std::sqrt(v + eps);
    mean[ch] = T(mu);
    var[ch] = T(v);
    for (int i = 0; i < m; ++i) {
      double o = (double(x[size_t(i) * c + ch]) - mu) * inv * double(gamma[ch]) + double(beta[ch]);
      y[size_t(i) * c + ch] = T(relu ? std::max(o, 0.0) : o);
    }
  }
}

template <typename T>
void bn_forward_eval(int m, int c, const T* x, const T* gamma, const T* beta, const T* mean,
                     const T* var, T* y, double eps, bool relu) {
  for (int ch = 0; ch < c; ++ch) {
    double inv = 1.0 / std::sqrt(double(var[ch]) + eps);
    for (int i = 0; i < m; ++i) {
      double o = (double(x[size_t(i) * c + ch]) - double(mean[ch])) * inv * double(gamma[ch]) +
                 double(beta[ch]);
      y[size_t(i) * c + ch] = T(relu ? std::max(o, 0.0) : o);
    }
  }
}

// Backward of training-mode BN given the batch mean/var of the forward; y is the forward
// output (ReLU mask when fused). dx =, dgamma +=, dbeta +=.
template <typename T>
void bn_backward(int m, int c, const T* x, const T* y, const T* dy, const T* gamma, const T* mean,
                 const T* var, T* dx, T* dgamma, T* dbeta, double eps, bool relu) {
  for (int ch = 0; ch < c; ++ch) {
    double inv = 1.0 / std::sqrt(double(var[ch]) + eps), mu = double(mean[ch]);
    auto g = [&](int i) {
      size_t j = size_t(i) * c + ch;
      return (relu && !(double(y[j]) > 0)) ? 0.0 : double(dy[j]);
    };
    double sdy = 0, sdyx = 0;
    for (int i = 0; i < m; ++i) {
      double gi = g(i);
      sdy += gi;
      sdyx += gi * (double(x[size_t(i) * c + ch]) - mu) * inv;
    }
    dgamma[ch] += T(sdyx);
    dbeta[ch] += T(sdy);
    for (int i = 0; i < m; ++i) {
      double xh = (double(x[size_t(i) * c + ch]) - mu) * inv;
      dx[size_t(i) * c + ch] = T(double(gamma[ch]) * inv * (g(i) - sdy / m - xh * sdyx / m));
    }
  }
}

template <typename T>
void maxpool_forward(const PoolShape& s, const T* x, T* y) {
  const int oh = s.oh(), ow = s.ow();
  for (int n = 0; n < s.n; ++n)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox)
        for (int c = 0; c < s.c; ++c) {
          T best = -std::numeric_limits<T>::infinity();
          for (int r = 0; r < s.kernel; ++r)
            for (int q = 0; q < s.kernel; ++q) {
              int iy = oy * s.stride - s.pad + r, ix = ox * s.stride - s.pad + q;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
              best = std::max(best, x[nhwc(s.h, s.w, s.c, n, iy, ix, c)]);
            }
          y[nhwc(oh, ow, s.c, n, oy, ox, c)] = best;
        }
}

// Gradient goes to the first maximum of each window (row-major window order).
template <typename T>
void maxpool_backward(const PoolShape& s, const T* x, const T* dy, T* dx) {
  const int oh = s.oh(), ow = s.ow();
  std::fill(dx, dx + size_t(s.n) * s.h * s.w * s.c, T(0));
  for (int n = 0; n < s.n; ++n)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox)
        for (int c = 0; c < s.c; ++c) {
          T best = -std::numeric_limits<T>::infinity();
          size_t arg = 0;
          for (int r = 0; r < s.kernel; ++r)
            for (int q = 0; q < s.kernel; ++q) {
              int iy = oy * s.stride - s.pad + r, ix = ox * s.stride - s.pad + q;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
              size_t j = nhwc(s.h, s.w, s.c, n, iy, ix, c);
              if (x[j] > best) best = x[j], arg = j;
            }
          dx[arg] += dy[nhwc(oh, ow, s.c, n, oy, ox, c)];
        }
}

template <typename T>
void linear_forward(int n, int in, int out, const T* x, const T* w, const T* b, T* y) {
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < out; ++o) {
      double acc = b ? double(b[o]) : 0.0;
      for (int j = 0; j < in; ++j)
        acc += double(x[size_t(i) * in + j]) * double(w[size_t(o) * in + j]);
      y[size_t(i) * out + o] = T(acc);
    }
}

template <typename T>
void linear_backward(int n, int in, int out, const T* x, const T* dy, const T* w, T* dx, T* dw,
                     T* db) {
  if (dx)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < in; ++j) {
        double acc = 0;
        for (int o = 0; o < out; ++o)
          acc += double(dy[size_t(i) * out + o]) * double(w[size_t(o) * in + j]);
        dx[size_t(i) * in + j] = T(acc);
      }
  for (int o = 0; o < out; ++o) {
    double sb = 0;
    for (int i = 0; i < n; ++i) sb += double(dy[size_t(i) * out + o]);
    if (db) db[o] += T(sb);
    for (int j = 0; j < in; ++j) {
      double acc = 0;
      for (int i = 0; i < n; ++i)
        acc += double(dy[size_t(i) * out + o]) * double(x[size_t(i) * in + j]);
      dw[size_t(o) * in + j] += T(acc);
    }
  }
}

template <typename T>
void relu_forward(const T* x, T* y, size_t count) {
  for (size_t i = 0; i < count; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
}
template <typename T>
void relu_backward(const T* y, const T* dy, T* dx, size_t count) {
  for (size_t i = 0; i < count; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
}

template <typename T>
void avgpool_forward(const T* x, T* y, int n, int c, int hw) {
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < c; ++ch) {
      double acc = 0;
      for (int p = 0; p < hw; ++p) acc += double(x[(size_t(i) * hw + p) * c + ch]);
      y[size_t(i) * c + ch] = T(acc / hw);
    }
}
template <typename T>
void avgpool_backward(const T* dy, T* dx, int n, int c, int hw) {
  for (int i = 0; i < n; ++i)
    for (int p = 0; p < hw; ++p)
      for (int ch = 0; ch < c; ++ch)
        dx[(size_t(i) * hw + p) * c + ch] = T(double(dy[size_t(i) * c + ch]) / hw);
}

}  // namespace sieve::nn::ref
