// The "cpu" backend: oneDNN (2.x API) for convolution, batch norm (+ fused ReLU), max pooling
// and ReLU, forward and backward; OpenBLAS sgemm for Linear; OpenMP loops for the rest.
//
// Layout choices (measured on AVX-512, see docs/engine.md): activations stay NHWC between
// layers, which oneDNN's jit kernels run natively (no activation reorders at all); only the
// weights are reordered, once per step, from the seam's OIHW into the layout each convolution
// primitive prefers ("any"), and weight gradients back. Primitives are created once per op
// object (per layer and batch size), so a steady training loop creates nothing.
//
// bf16 (mixed precision): activations bf16 between layers; each convolution takes its fp32
// master weights through the same cached reorder, now also casting to bf16, and writes its
// weight gradient in fp32 (oneDNN's bf16 backward-weights accumulates in fp32 and can emit
// fp32), so gradients are never rounded to bf16. Batch norm keeps fp32 statistics, scale and
// shift. Linear (the classifier, a tiny GEMM) runs fp32 sgemm on up-cast activations.
// Where oneDNN has no bf16 kernels at all (below AVX-512), bf16 is emulated here, op by op
// (KernelIo below): same numbers, fp32 speed.
//
// Determinism: oneDNN's CPU kernels partition work statically for a given thread count and
// reduce in a fixed order; OpenBLAS sgemm splits over M/N (not K). Same threads -> same bits.
#include <cblas.h>
#include <string>

#include <cstring>
#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "nn/backend_impl.hpp"
#include "nn/tensor.hpp"

namespace sieve::nn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

dnnl::engine& eng() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& strm() {
  static dnnl::stream s(eng());
  return s;
}
// Below this many elements our own loops stay serial: a parallel region costs more than the
// work, and far more when the cores are oversubscribed (MPI ranks x threads).
constexpr size_t kParallelMin = 1 << 15;

memory mem(const memory::desc& md, const void* p) {
  return memory(md, eng(), const_cast<void*>(p));
}
dt act_dt(DType t) {
  return t == DType::bf16 ? dt::bf16 : dt::f32;
}

// Whether the CPU computes bf16 natively: AVX512-BF16 (AMX CPUs have it too). Probed once.
bool native_bf16() {
  static const bool has = [] {
    const int isa = int(dnnl::get_effective_cpu_isa());
    const int bf16_isa = int(dnnl::cpu_isa::avx512_core_bf16);
    return (isa & bf16_isa) == bf16_isa;
  }();
  return has;
}

// Whether oneDNN 2.6 has bf16 kernels here: natively, or by its own emulation on plain
// AVX-512; not below AVX-512 (KernelIo emulates bf16 there). Probed once.
bool dnnl_bf16_kernels() {
  static const bool has = native_bf16() || [] {
    try {  // can oneDNN make a bf16 convolution on this CPU at all?
      memory::desc a({1, 8, 4, 4}, dt::bf16, tag::nhwc), w({8, 8, 3, 3}, dt::bf16, tag::any);
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training,
                                        dnnl::algorithm::convolution_direct, a, w, a, {1, 1},
                                        {1, 1}, {1, 1});
      dnnl::convolution_forward::primitive_desc pd(d, eng());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return has;
}

// What the oneDNN primitives read and write. Normally the activations themselves: the
// primitives are made for the backend's dtype. Where oneDNN has no bf16 kernels (CPUs below
// AVX-512) the bf16 backend still stores its activations in bf16, and each op runs oneDNN's
// fp32 kernel on them: inputs decoded to fp32 into scratch, convolution weights rounded to
// bf16 values, outputs rounded to bf16 on the way back. A bf16 kernel forms the same products
// (a bf16 x bf16 product is exact in fp32) and sums them in fp32, only in another order, so
// this runs bf16's numerics (what precision: bf16 does to accuracy) at fp32's speed less the
// conversions; never bf16's speed. Ops run one at a time (backend.hpp), so one set of scratch
// buffers serves every op of the backend: slots 0 and 1 for inputs, 2 for the output (also
// the staging of the backend's own fp32 loops on bf16 data: add, average pooling).
class KernelIo {
 public:
  explicit KernelIo(const HostBackend& be)
      : KernelIo(be, be.dtype() == DType::bf16 && !dnnl_bf16_kernels()) {}
  // decode: kernels run in fp32 on bf16 data decoded into scratch (any bf16 backend).
  KernelIo(const HostBackend& be, bool decode) : be_(be), decode_(decode) {}
  std::vector<float>& scratch(int slot) { return scratch_[slot]; }
  dt kernel_dt() const { return decode_ ? dt::f32 : act_dt(be_.dtype()); }
  const void* in(const Act* x, size_t count, int slot) {
    return decode_ ? be_.as_f32(x, count, scratch_[slot]) : x;
  }
  void* out(Act* y, size_t count) { return decode_ ? be_.f32_out(y, count, scratch_[2]) : y; }
  // After the kernel wrote out(y, count): round its result into y.
  void done(Act* y, size_t count) {
    if (decode_) be_.store(scratch_[2].data(), y, count);
  }
  // Convolution weights as the kernel takes them: w itself, or rounded to bf16 values.
  const float* weights(const float* w, size_t count) {
    return decode_ ? HostBackend::rounded_to_bf16(w, count, weights_) : w;
  }

 private:
  const HostBackend& be_;
  bool decode_;
  std::vector<float> scratch_[3], weights_;
};

// oneDNN 2.6.3 (Debian 12) has an AVX2 1x1-convolution kernel whose backward-weights pass
// writes past its own buffer when a channel count is not a multiple of 8 and the stride is 2
// (valgrind: 8-byte writes after a block made at primitive creation; the 4-channel test
// ResNet's downsample crashed or hung on an AVX2-only EPYC). 1x1 convolutions with such
// channel counts (any stride and all three passes: a margin around what was seen) step past
// the jit_1x1:avx2 implementation to the next one oneDNN offers; they are the narrowest
// layers, where speed matters least. Checked under valgrind on AVX2 (2026-11-23): the direct
// jit:avx2 kernels (3x3, 7x7, strides 1 and 2, 1 to 16 input and 4 to 64 output channels,
// forward and both backwards) and jit_1x1 at stride 1 write nothing out of bounds, and they
// are kept: the gemm-based fallback this once sent every non-multiple-of-8 shape to took
// 8.3 ms for the backward weights of a 3-channel stem (128 x 32 x 32 images, 2 threads) where
// jit:avx2 takes 3.7 ms on an idle machine, and degraded far worse under contention (2.5 s
// against 8 ms once, with the 2 cores oversubscribed). AVX-512 kernels are not affected.
template <typename PD>
void avoid_avx2_jit_1x1_for_odd_channels(PD& pd, const ConvShape& s) {
  if (s.r != 1 || s.s != 1 || (s.c % 8 == 0 && s.k % 8 == 0)) return;
  auto avx2_jit_1x1 = [&] {
    const std::string name = pd.impl_info_str();  // e.g. "jit_1x1:avx2"
    return name.rfind("jit_1x1", 0) == 0 && name.find(":avx2") != std::string::npos;
  };
  while (avx2_jit_1x1() && pd.next_impl()) {
  }
}

// The weight gradient of a convolution as im2col and one OpenBLAS sgemm, for the shapes where
// oneDNN 2.6 (Debian 12) has no jit kernel for it and falls back to "gemm:jit" (or "ref"):
// on AVX2, 3x3 convolutions over 1x1 and 2x2 feature maps, which is what ResNet-18's last
// two stages see on 32x32 images through a stride-4 stem (the quickstart's sweep). Measured on
// a Zen 3 (batch 32, 1 thread): gemm:jit takes 263 us a call (64 channels, 1x1) and 123 us
// (32 channels, 2x2) for work one sgemm does in 4-7 us, a fifth of a sweep run's time
// (docs/engine.md). Only for fp32 kernels and where the column buffer stays small (the rows are
// the output pixels of the batch, the columns one kernel window); everything else stays
// oneDNN's. Deterministic as the rest: sgemm splits over M/N, not K.
class Im2colWeightGrad {
 public:
  static bool fits(const ConvShape& s) {
    return size_t(s.n) * s.oh() * s.ow() * size_t(s.c) * s.r * s.s <= kMaxColumnFloats;
  }
  explicit Im2colWeightGrad(const ConvShape& s)
      : shape_(s),
        rows_(size_t(s.n) * s.oh() * s.ow()),
        cols_(size_t(s.c) * s.r * s.s),
        col_(rows_ * cols_) {}

  // dw (OIHW, fp32) += the gradient for NHWC input x and output gradient dy. The columns are
  // ordered as a row of dw, (channel, kernel row, kernel column), so one sgemm with beta 1
  // accumulates straight into it: dw[k][(c, r, q)] += sum over output pixels of
  // dy[pixel][k] * col[pixel][(c, r, q)].
  void accumulate(const float* x, const float* dy, float* dw) {
    const ConvShape& s = shape_;
    const size_t taps = size_t(s.r) * s.s;  // stride between one channel's taps in a row
    float* row = col_.data();
    for (int n = 0; n < s.n; ++n)
      for (int oy = 0; oy < s.oh(); ++oy)
        for (int ox = 0; ox < s.ow(); ++ox, row += cols_)
          for (int r = 0; r < s.r; ++r)
            for (int q = 0; q < s.s; ++q) {
              const int iy = oy * s.stride + r - s.pad, ix = ox * s.stride + q - s.pad;
              float* dst = row + size_t(r) * s.s + q;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) {  // padding
                for (int c = 0; c < s.c; ++c) dst[c * taps] = 0.0f;
                continue;
              }
              const float* src = x + ((size_t(n) * s.h + iy) * s.w + ix) * s.c;
              for (int c = 0; c < s.c; ++c) dst[c * taps] = src[c];
            }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s.k, int(cols_), int(rows_), 1.f, dy, s.k,
                col_.data(), int(cols_), 1.f, dw, int(cols_));
  }

 private:
  static constexpr size_t kMaxColumnFloats = size_t(1) << 22;  // 16 MiB
  ConvShape shape_;
  size_t rows_, cols_;
  std::vector<float> col_;
};

// Whether oneDNN's pick for a pass is its im2col-and-gemm fallback ("gemm:jit", named
// "x64:gemm:jit" in 2.6) or the reference loop, rather than a direct or brgemm kernel.
template <typename PD>
bool is_gemm_or_ref_fallback(const PD& pd) {
  const std::string name = pd.impl_info_str();
  return name.find("gemm:jit") != std::string::npos || name.rfind("ref", 0) == 0;
}

class DnnlConv final : public ConvOp {
 public:
  DnnlConv(const ConvShape& s, KernelIo& io)
      : io_(io),
        nx_(size_t(s.n) * s.c * s.h * s.w),
        ny_(size_t(s.n) * s.k * s.oh() * s.ow()),
        nw_(size_t(s.k) * s.c * s.r * s.s) {
    const dt t = io.kernel_dt();
    memory::dims src{s.n, s.c, s.h, s.w}, wei{s.k, s.c, s.r, s.s}, dst{s.n, s.k, s.oh(), s.ow()};
    memory::dims strides{s.stride, s.stride}, pad{s.pad, s.pad};
    src_md_ = memory::desc(src, t, tag::nhwc);
    dst_md_ = memory::desc(dst, t, tag::nhwc);
    user_w_md_ = memory::desc(wei, dt::f32, tag::oihw);
    memory::desc w_any(wei, t, tag::any);
    memory::desc dw_any(wei, dt::f32, tag::any);  // weight gradients stay fp32
    dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training,
                                       dnnl::algorithm::convolution_direct, src_md_, w_any, dst_md_,
                                       strides, pad, pad);
    fwd_pd_ = dnnl::convolution_forward::primitive_desc(fd, eng());
    avoid_avx2_jit_1x1_for_odd_channels(fwd_pd_, s);
    fwd_ = dnnl::convolution_forward(fwd_pd_);
    dnnl::convolution_backward_data::desc bd(dnnl::algorithm::convolution_direct, src_md_, w_any,
                                             dst_md_, strides, pad, pad);
    bwd_d_pd_ = dnnl::convolution_backward_data::primitive_desc(bd, eng(), fwd_pd_);
    avoid_avx2_jit_1x1_for_odd_channels(bwd_d_pd_, s);
    bwd_d_ = dnnl::convolution_backward_data(bwd_d_pd_);
    dnnl::convolution_backward_weights::desc bw(dnnl::algorithm::convolution_direct, src_md_,
                                                dw_any, dst_md_, strides, pad, pad);
    bwd_w_pd_ = dnnl::convolution_backward_weights::primitive_desc(bw, eng(), fwd_pd_);
    avoid_avx2_jit_1x1_for_odd_channels(bwd_w_pd_, s);
    if (t == dt::f32 && is_gemm_or_ref_fallback(bwd_w_pd_) && Im2colWeightGrad::fits(s))
      im2col_dw_ = std::make_unique<Im2colWeightGrad>(s);
    else
      make_onednn_weight_grad();
    // Weight reorders, created once: OIHW -> each primitive's layout.
    if (fwd_pd_.weights_desc() != user_w_md_) {
      fwd_w_ = memory(fwd_pd_.weights_desc(), eng());
      to_fwd_ = dnnl::reorder(
          dnnl::reorder::primitive_desc(eng(), user_w_md_, eng(), fwd_pd_.weights_desc()));
    }
    if (bwd_d_pd_.weights_desc() != user_w_md_) {
      bwd_w_in_ = memory(bwd_d_pd_.weights_desc(), eng());
      to_bwd_ = dnnl::reorder(
          dnnl::reorder::primitive_desc(eng(), user_w_md_, eng(), bwd_d_pd_.weights_desc()));
    }
  }

  void forward(const Act* x, const float* w, Act* y) override {
    memory wm = weights_for(to_fwd_, w, fwd_w_);
    fwd_.execute(strm(), {{DNNL_ARG_SRC, mem(src_md_, io_.in(x, nx_, 0))},
                          {DNNL_ARG_WEIGHTS, wm},
                          {DNNL_ARG_DST, mem(dst_md_, io_.out(y, ny_))}});
    strm().wait();
    io_.done(y, ny_);
  }
  void backward_data(const Act* dy, const float* w, Act* dx) override {
    memory wm = weights_for(to_bwd_, w, bwd_w_in_);
    bwd_d_.execute(strm(), {{DNNL_ARG_DIFF_DST, mem(dst_md_, io_.in(dy, ny_, 0))},
                            {DNNL_ARG_WEIGHTS, wm},
                            {DNNL_ARG_DIFF_SRC, mem(src_md_, io_.out(dx, nx_))}});
    strm().wait();
    io_.done(dx, nx_);
  }
  void backward_weights(const Act* x, const Act* dy, float* dw) override {
    if (im2col_dw_) {
      im2col_dw_->accumulate(static_cast<const float*>(io_.in(x, nx_, 0)),
                             static_cast<const float*>(io_.in(dy, ny_, 1)), dw);
      return;
    }
    bwd_w_.execute(strm(), {{DNNL_ARG_SRC, mem(src_md_, io_.in(x, nx_, 0))},
                            {DNNL_ARG_DIFF_DST, mem(dst_md_, io_.in(dy, ny_, 1))},
                            {DNNL_ARG_DIFF_WEIGHTS, dw_opaque_}});
    memory out = mem(user_w_md_, dw);
    from_dw_.execute(strm(), dw_opaque_, out);
    strm().wait();
  }

 private:
  // oneDNN's weight-gradient primitive, and the reorder of its result back to OIHW with a
  // sum post-op, so that it accumulates (+=) straight into grads.
  void make_onednn_weight_grad() {
    bwd_w_ = dnnl::convolution_backward_weights(bwd_w_pd_);
    dnnl::post_ops sum;
    sum.append_sum(1.f);
    dnnl::primitive_attr acc;
    acc.set_post_ops(sum);
    dw_opaque_ = memory(bwd_w_pd_.diff_weights_desc(), eng());
    from_dw_ = dnnl::reorder(dnnl::reorder::primitive_desc(eng(), bwd_w_pd_.diff_weights_desc(),
                                                           eng(), user_w_md_, acc));
  }

  // The weights as the primitive wants them: the user buffer itself if the layout matches
  // (no reorder primitive), otherwise reordered into the cached buffer.
  memory weights_for(dnnl::reorder& r, const float* w, memory& cache) {
    memory user = mem(user_w_md_, io_.weights(w, nw_));
    if (!r) return user;
    r.execute(strm(), user, cache);
    return cache;
  }

  KernelIo& io_;
  size_t nx_, ny_, nw_;
  memory::desc src_md_, dst_md_, user_w_md_;
  dnnl::convolution_forward::primitive_desc fwd_pd_;
  dnnl::convolution_forward fwd_;
  dnnl::convolution_backward_data::primitive_desc bwd_d_pd_;
  dnnl::convolution_backward_data bwd_d_;
  dnnl::convolution_backward_weights::primitive_desc bwd_w_pd_;
  dnnl::convolution_backward_weights bwd_w_;
  memory fwd_w_, bwd_w_in_, dw_opaque_;
  dnnl::reorder to_fwd_, to_bwd_, from_dw_;
  std::unique_ptr<Im2colWeightGrad> im2col_dw_;  // else bwd_w_ and from_dw_ (oneDNN's)
};

// Batch norm on bf16 activations whose channel count oneDNN's bf16 JIT kernels do not take
// (8 channels, e.g. a width-1/8 ResNet's first stage, on AVX512-BF16): oneDNN 2.6 then offers
// only its generic `nspc_bnorm:any`, measured at ~90 ms per call where the fp32 JIT kernel
// takes 1.3 ms (batch 64, 32x32, 1 thread), which made a whole bf16 training step 16x slower
// than fp32. Such layers run the fp32 kernel on the bf16 data decoded into scratch (`f32_io`):
// the same result to bf16 rounding (oneDNN's bf16 batch norm computes in fp32 too).
class DnnlBatchNorm final : public BatchNormOp {
 public:
  DnnlBatchNorm(int n, int c, int h, int w, bool relu, float momentum, float eps, KernelIo& io,
                KernelIo& f32_io)
      : io_(io),
        count_(size_t(n) * c * h * w),
        m_(n * h * w),
        c_(c),
        relu_(relu),
        momentum_(momentum),
        mean_(c),
        var_(c),
        dg_(c),
        db_(c),
        zeros_(c, 0.f) {
    make_primitives(n, c, h, w, eps);
    if (io.kernel_dt() == dt::bf16 && !(is_jit(train_pd_) && is_jit(bwd_pd_))) {
      io_ = f32_io;
      make_primitives(n, c, h, w, eps);
    }
  }

  void forward(const Act* x, const float* gamma, const float* beta, float* rm, float* rv, Act* y,
               bool training) override {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(data_md_, io_.get().in(x, count_, 0))},
                                         {DNNL_ARG_DST, mem(data_md_, io_.get().out(y, count_))},
                                         {DNNL_ARG_SCALE, mem(vec_md_, gamma)},
                                         {DNNL_ARG_SHIFT, mem(vec_md_, beta)}};
    if (training) {
      args.insert({DNNL_ARG_MEAN, mem(vec_md_, mean_.data())});
      args.insert({DNNL_ARG_VARIANCE, mem(vec_md_, var_.data())});
      if (relu_) args.insert({DNNL_ARG_WORKSPACE, ws_});
      train_.execute(strm(), args);
      strm().wait();
      update_running_stats(m_, c_, momentum_, mean_.data(), var_.data(), rm, rv);
    } else {
      args.insert({DNNL_ARG_MEAN, mem(vec_md_, rm)});
      args.insert({DNNL_ARG_VARIANCE, mem(vec_md_, rv)});
      eval_.execute(strm(), args);
      strm().wait();
    }
    io_.get().done(y, count_);
  }

  void backward(const Act* x, const Act*, const Act* dy, const float* gamma, Act* dx, float* dgamma,
                float* dbeta) override {
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, mem(data_md_, io_.get().in(x, count_, 0))},
        {DNNL_ARG_DIFF_DST, mem(data_md_, io_.get().in(dy, count_, 1))},
        {DNNL_ARG_MEAN, mem(vec_md_, mean_.data())},
        {DNNL_ARG_VARIANCE, mem(vec_md_, var_.data())},
        {DNNL_ARG_SCALE, mem(vec_md_, gamma)},
        {DNNL_ARG_SHIFT, mem(vec_md_, zeros_.data())},
        {DNNL_ARG_DIFF_SRC, mem(data_md_, io_.get().out(dx, count_))},
        {DNNL_ARG_DIFF_SCALE, mem(vec_md_, dg_.data())},
        {DNNL_ARG_DIFF_SHIFT, mem(vec_md_, db_.data())}};
    if (relu_) args.insert({DNNL_ARG_WORKSPACE, ws_});
    bwd_.execute(strm(), args);
    strm().wait();
    io_.get().done(dx, count_);
    for (int i = 0; i < c_; ++i) dgamma[i] += dg_[i], dbeta[i] += db_[i];
  }

 private:
  void make_primitives(int n, int c, int h, int w, float eps) {
    data_md_ = memory::desc({n, c, h, w}, io_.get().kernel_dt(), tag::nhwc);
    vec_md_ = memory::desc({c}, dt::f32, tag::a);
    auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    if (relu_) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
    dnnl::batch_normalization_forward::desc td(dnnl::prop_kind::forward_training, data_md_, eps,
                                               flags);
    train_pd_ = dnnl::batch_normalization_forward::primitive_desc(td, eng());
    train_ = dnnl::batch_normalization_forward(train_pd_);
    dnnl::batch_normalization_forward::desc ed(dnnl::prop_kind::forward_inference, data_md_, eps,
                                               flags | dnnl::normalization_flags::use_global_stats);
    eval_pd_ = dnnl::batch_normalization_forward::primitive_desc(ed, eng());
    eval_ = dnnl::batch_normalization_forward(eval_pd_);
    dnnl::batch_normalization_backward::desc bd(dnnl::prop_kind::backward, data_md_, data_md_, eps,
                                                flags);
    bwd_pd_ = dnnl::batch_normalization_backward::primitive_desc(bd, eng(), train_pd_);
    bwd_ = dnnl::batch_normalization_backward(bwd_pd_);
    if (relu_) ws_ = memory(train_pd_.workspace_desc(), eng());
  }

  template <typename PD>
  static bool is_jit(const PD& pd) {
    return std::string(pd.impl_info_str()).find("jit") != std::string::npos;
  }

  std::reference_wrapper<KernelIo> io_;  // io, or f32_io for a layer without a bf16 JIT kernel
  size_t count_;
  int m_, c_;
  bool relu_;
  float momentum_;
  // zeros_: oneDNN 2.6's backward asks for the shift argument although dx does not depend on
  // it (the fused-ReLU mask comes from the workspace).
  std::vector<float> mean_, var_, dg_, db_, zeros_;
  memory::desc data_md_, vec_md_;
  dnnl::batch_normalization_forward::primitive_desc train_pd_, eval_pd_;
  dnnl::batch_normalization_forward train_, eval_;
  dnnl::batch_normalization_backward::primitive_desc bwd_pd_;
  dnnl::batch_normalization_backward bwd_;
  memory ws_;
};

class DnnlMaxPool final : public MaxPoolOp {
 public:
  DnnlMaxPool(const PoolShape& s, KernelIo& io)
      : io_(io), nx_(size_t(s.n) * s.c * s.h * s.w), ny_(size_t(s.n) * s.c * s.oh() * s.ow()) {
    src_md_ = memory::desc({s.n, s.c, s.h, s.w}, io.kernel_dt(), tag::nhwc);
    dst_md_ = memory::desc({s.n, s.c, s.oh(), s.ow()}, io.kernel_dt(), tag::nhwc);
    memory::dims k{s.kernel, s.kernel}, st{s.stride, s.stride}, p{s.pad, s.pad};
    dnnl::pooling_forward::desc fd(dnnl::prop_kind::forward_training, dnnl::algorithm::pooling_max,
                                   src_md_, dst_md_, st, k, p, p);
    fwd_pd_ = dnnl::pooling_forward::primitive_desc(fd, eng());
    fwd_ = dnnl::pooling_forward(fwd_pd_);
    dnnl::pooling_backward::desc bd(dnnl::algorithm::pooling_max, src_md_, dst_md_, st, k, p, p);
    bwd_pd_ = dnnl::pooling_backward::primitive_desc(bd, eng(), fwd_pd_);
    bwd_ = dnnl::pooling_backward(bwd_pd_);
    ws_ = memory(fwd_pd_.workspace_desc(), eng());
  }
  void forward(const Act* x, Act* y, bool) override {
    fwd_.execute(strm(), {{DNNL_ARG_SRC, mem(src_md_, io_.in(x, nx_, 0))},
                          {DNNL_ARG_DST, mem(dst_md_, io_.out(y, ny_))},
                          {DNNL_ARG_WORKSPACE, ws_}});
    strm().wait();
    io_.done(y, ny_);
  }
  void backward(const Act*, const Act* dy, Act* dx) override {
    bwd_.execute(strm(), {{DNNL_ARG_DIFF_DST, mem(dst_md_, io_.in(dy, ny_, 0))},
                          {DNNL_ARG_WORKSPACE, ws_},
                          {DNNL_ARG_DIFF_SRC, mem(src_md_, io_.out(dx, nx_))}});
    strm().wait();
    io_.done(dx, nx_);
  }

 private:
  KernelIo& io_;
  size_t nx_, ny_;
  memory::desc src_md_, dst_md_;
  dnnl::pooling_forward::primitive_desc fwd_pd_;
  dnnl::pooling_forward fwd_;
  dnnl::pooling_backward::primitive_desc bwd_pd_;
  dnnl::pooling_backward bwd_;
  memory ws_;
};

class BlasLinear final : public LinearOp {
 public:
  BlasLinear(HostBackend& be, int n, int in, int out) : be_(be), n_(n), in_(in), out_(out) {}
  void forward(const Act* xa, const float* w, const float* b, Act* ya) override {
    const size_t ny = size_t(n_) * out_;
    const float* x = be_.as_f32(xa, size_t(n_) * in_, xs_);
    float* y = be_.f32_out(ya, ny, ys_);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n_, out_, in_, 1.f, x, in_, w, in_, 0.f, y,
                out_);
    if (b)
      for (int i = 0; i < n_; ++i)
        for (int o = 0; o < out_; ++o) y[size_t(i) * out_ + o] += b[o];
    be_.store(y, ya, ny);
  }
  void backward(const Act* xa, const Act* dya, const float* w, Act* dxa, float* dw,
                float* db) override {
    const size_t nx = size_t(n_) * in_;
    const float* x = be_.as_f32(xa, nx, xs_);
    const float* dy = be_.as_f32(dya, size_t(n_) * out_, ys_);
    if (dxa) {
      float* dx = be_.f32_out(dxa, nx, dxs_);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n_, in_, out_, 1.f, dy, out_, w, in_,
                  0.f, dx, in_);
      be_.store(dx, dxa, nx);
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_, in_, n_, 1.f, dy, out_, x, in_, 1.f,
                dw, in_);
    if (db)
      for (int o = 0; o < out_; ++o) {
        float s = 0;
        for (int i = 0; i < n_; ++i) s += dy[size_t(i) * out_ + o];
        db[o] += s;
      }
  }

 private:
  HostBackend& be_;
  int n_, in_, out_;
  std::vector<float> xs_, ys_, dxs_;  // bf16 staging
};

class CpuBackend final : public HostBackend {
 public:
  explicit CpuBackend(DType t) : HostBackend(t), io_(*this), f32_io_(*this, t == DType::bf16) {}
  std::string name() const override { return "cpu"; }
  std::unique_ptr<ConvOp> conv2d(const ConvShape& s) override {
    return std::make_unique<DnnlConv>(s, io_);
  }
  std::unique_ptr<BatchNormOp> batchnorm(int n, int c, int h, int w, bool relu, float momentum,
                                         float eps) override {
    return std::make_unique<DnnlBatchNorm>(n, c, h, w, relu, momentum, eps, io_, f32_io_);
  }
  std::unique_ptr<MaxPoolOp> maxpool(const PoolShape& s) override {
    return std::make_unique<DnnlMaxPool>(s, io_);
  }
  std::unique_ptr<LinearOp> linear(int n, int in, int out) override {
    return std::make_unique<BlasLinear>(*this, n, in, out);
  }
  void relu_forward(const Act* x, Act* y, size_t count) override {
    Relu& r = relu(count);
    r.fwd.execute(strm(), {{DNNL_ARG_SRC, mem(r.md, io_.in(x, count, 0))},
                           {DNNL_ARG_DST, mem(r.md, io_.out(y, count))}});
    strm().wait();
    io_.done(y, count);
  }
  void relu_backward(const Act* y, const Act* dy, Act* dx, size_t count) override {
    Relu& r = relu(count);
    r.bwd.execute(strm(), {{DNNL_ARG_DST, mem(r.md, io_.in(y, count, 0))},
                           {DNNL_ARG_DIFF_DST, mem(r.md, io_.in(dy, count, 1))},
                           {DNNL_ARG_DIFF_SRC, mem(r.md, io_.out(dx, count))}});
    strm().wait();
    io_.done(dx, count);
  }
  void add(const Act* a, const Act* b, Act* y, size_t count) override {
    if (dtype() == DType::bf16) {
      // One pass over bf16 in and out (decode, add, round in registers): staging both inputs
      // and the sum in fp32 scratch made the residual add 4x the fp32 add's time (8.4M
      // elements, 1 thread: 39 ms against 9.7 ms; fused: see docs/engine.md).
      const uint16_t* ab = static_cast<const uint16_t*>(a);
      const uint16_t* bb = static_cast<const uint16_t*>(b);
      uint16_t* yb = static_cast<uint16_t*>(y);
#pragma omp parallel for simd schedule(static) if (count > kParallelMin)
      for (size_t i = 0; i < count; ++i) yb[i] = to_bf16(from_bf16(ab[i]) + from_bf16(bb[i]));
      return;
    }
    const float* af = as_f32(a, count, io_.scratch(0));
    const float* bf = as_f32(b, count, io_.scratch(1));
    float* out = f32_out(y, count, io_.scratch(2));
#pragma omp parallel for simd schedule(static) if (count > kParallelMin)
    for (size_t i = 0; i < count; ++i) out[i] = af[i] + bf[i];
    store(out, y, count);
  }
  void avgpool_forward(const Act* xa, Act* ya, int n, int c, int hw) override {
    const float* x = as_f32(xa, size_t(n) * c * hw, io_.scratch(0));
    float* y = f32_out(ya, size_t(n) * c, io_.scratch(2));
#pragma omp parallel for schedule(static) if (size_t(n) * c * hw > kParallelMin)
    for (int i = 0; i < n; ++i) {
      float* yi = y + size_t(i) * c;
      std::memset(yi, 0, sizeof(float) * c);
      for (int p = 0; p < hw; ++p) {
        const float* xp = x + (size_t(i) * hw + p) * c;
        for (int ch = 0; ch < c; ++ch) yi[ch] += xp[ch];
      }
      for (int ch = 0; ch < c; ++ch) yi[ch] /= float(hw);
    }
    store(y, ya, size_t(n) * c);
  }
  void avgpool_backward(const Act* dya, Act* dxa, int n, int c, int hw) override {
    const float* dy = as_f32(dya, size_t(n) * c, io_.scratch(0));
    float* dx = f32_out(dxa, size_t(n) * c * hw, io_.scratch(2));
#pragma omp parallel for schedule(static) if (size_t(n) * c * hw > kParallelMin)
    for (int i = 0; i < n; ++i)
      for (int p = 0; p < hw; ++p)
        for (int ch = 0; ch < c; ++ch)
          dx[(size_t(i) * hw + p) * c + ch] = dy[size_t(i) * c + ch] / float(hw);
    store(dx, dxa, size_t(n) * c * hw);
  }

 private:
  struct Relu {
    memory::desc md;
    dnnl::eltwise_forward fwd;
    dnnl::eltwise_backward bwd;
  };
  // ReLU primitives per element count (a handful of distinct sizes per model).
  Relu& relu(size_t count) {
    auto it = relu_.find(count);
    if (it != relu_.end()) return it->second;
    Relu r;
    r.md = memory::desc({memory::dim(count)}, io_.kernel_dt(), tag::a);
    dnnl::eltwise_forward::desc fd(dnnl::prop_kind::forward_training,
                                   dnnl::algorithm::eltwise_relu_use_dst_for_bwd, r.md, 0.f);
    dnnl::eltwise_forward::primitive_desc fpd(fd, eng());
    r.fwd = dnnl::eltwise_forward(fpd);
    dnnl::eltwise_backward::desc bd(dnnl::algorithm::eltwise_relu_use_dst_for_bwd, r.md, r.md, 0.f);
    r.bwd = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(bd, eng(), fpd));
    return relu_.emplace(count, std::move(r)).first->second;
  }
  KernelIo io_;
  KernelIo f32_io_;  // fp32 kernels on decoded bf16 data: ops oneDNN has no fast bf16 kernel for
  std::unordered_map<size_t, Relu> relu_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(DType dtype) {
  return std::make_unique<CpuBackend>(dtype);
}

// bf16 runs on every CPU (natively, by oneDNN's emulation on AVX-512, or by KernelIo's below
// it); natively only with AVX512-BF16 or AMX.
bool cpu_backend_supports(DType dtype, bool native, std::string* why) {
  if (dtype == DType::f32 || !native || native_bf16()) return true;
  if (why) *why = "this CPU has no native bf16 (oneDNN needs AVX512-BF16 or AMX)";
  return false;
}

}  // namespace sieve::nn
