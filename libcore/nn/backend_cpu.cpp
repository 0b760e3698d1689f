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
//
// Determinism: oneDNN's CPU kernels partition work statically for a given thread count and
// reduce in a fixed order; OpenBLAS sgemm splits over M/N (not K). Same threads -> same bits.
#include <string>
#include <cblas.h>

#include <cstring>
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

// oneDNN 2.6.3 (Debian 12) has an AVX2 convolution kernel that writes past its own buffer
// when a channel count is not a multiple of 8 (valgrind: an 8-byte write after a 1,152-byte
// block made at primitive creation; a 4-channel ResNet crashed or hung on an AVX2-only
// EPYC). Such shapes step past the avx2 JIT implementation to the next one oneDNN offers
// (gemm-based); they are the narrowest layers, where speed matters least. AVX-512 kernels
// are not affected and are kept.
template <typename PD>
void avoid_avx2_jit_for_odd_channels(PD& pd, const ConvShape& s) {
  if (s.c % 8 == 0 && s.k % 8 == 0) return;
  auto avx2_jit = [&] {
    const std::string name = pd.impl_info_str();  // e.g. "jit:avx2", "jit_1x1:avx2"
    return name.rfind("jit", 0) == 0 && name.find(":avx2") != std::string::npos;
  };
  while (avx2_jit() && pd.next_impl()) {
  }
}

class DnnlConv final : public ConvOp {
 public:
  DnnlConv(const ConvShape& s, DType t) {
    memory::dims src{s.n, s.c, s.h, s.w}, wei{s.k, s.c, s.r, s.s}, dst{s.n, s.k, s.oh(), s.ow()};
    memory::dims strides{s.stride, s.stride}, pad{s.pad, s.pad};
    src_md_ = memory::desc(src, act_dt(t), tag::nhwc);
    dst_md_ = memory::desc(dst, act_dt(t), tag::nhwc);
    user_w_md_ = memory::desc(wei, dt::f32, tag::oihw);
    memory::desc w_any(wei, act_dt(t), tag::any);
    memory::desc dw_any(wei, dt::f32, tag::any);  // weight gradients stay fp32
    dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training,
                                       dnnl::algorithm::convolution_direct, src_md_, w_any, dst_md_,
                                       strides, pad, pad);
    fwd_pd_ = dnnl::convolution_forward::primitive_desc(fd, eng());
    avoid_avx2_jit_for_odd_channels(fwd_pd_, s);
    fwd_ = dnnl::convolution_forward(fwd_pd_);
    dnnl::convolution_backward_data::desc bd(dnnl::algorithm::convolution_direct, src_md_, w_any,
                                             dst_md_, strides, pad, pad);
    bwd_d_pd_ = dnnl::convolution_backward_data::primitive_desc(bd, eng(), fwd_pd_);
    avoid_avx2_jit_for_odd_channels(bwd_d_pd_, s);
    bwd_d_ = dnnl::convolution_backward_data(bwd_d_pd_);
    dnnl::convolution_backward_weights::desc bw(dnnl::algorithm::convolution_direct, src_md_, dw_any,
                                                dst_md_, strides, pad, pad);
    bwd_w_pd_ = dnnl::convolution_backward_weights::primitive_desc(bw, eng(), fwd_pd_);
    avoid_avx2_jit_for_odd_channels(bwd_w_pd_, s);
    bwd_w_ = dnnl::convolution_backward_weights(bwd_w_pd_);
    // Weight reorders, created once: OIHW -> each primitive's layout, and the weight
    // gradient back to OIHW with a sum post-op, so it accumulates (+=) straight into grads.
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
    dnnl::post_ops sum;
    sum.append_sum(1.f);
    dnnl::primitive_attr acc;
    acc.set_post_ops(sum);
    dw_opaque_ = memory(bwd_w_pd_.diff_weights_desc(), eng());
    from_dw_ = dnnl::reorder(dnnl::reorder::primitive_desc(eng(), bwd_w_pd_.diff_weights_desc(),
                                                           eng(), user_w_md_, acc));
  }

  void forward(const Act* x, const float* w, Act* y) override {
    memory wm = weights_for(to_fwd_, w, fwd_w_);
    fwd_.execute(
        strm(),
        {{DNNL_ARG_SRC, mem(src_md_, x)}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, mem(dst_md_, y)}});
    strm().wait();
  }
  void backward_data(const Act* dy, const float* w, Act* dx) override {
    memory wm = weights_for(to_bwd_, w, bwd_w_in_);
    bwd_d_.execute(strm(), {{DNNL_ARG_DIFF_DST, mem(dst_md_, dy)},
                            {DNNL_ARG_WEIGHTS, wm},
                            {DNNL_ARG_DIFF_SRC, mem(src_md_, dx)}});
    strm().wait();
  }
  void backward_weights(const Act* x, const Act* dy, float* dw) override {
    bwd_w_.execute(strm(), {{DNNL_ARG_SRC, mem(src_md_, x)},
                            {DNNL_ARG_DIFF_DST, mem(dst_md_, dy)},
                            {DNNL_ARG_DIFF_WEIGHTS, dw_opaque_}});
    memory out = mem(user_w_md_, dw);
    from_dw_.execute(strm(), dw_opaque_, out);
    strm().wait();
  }

 private:
  // The weights as the primitive wants them: the user buffer itself if the layout matches
  // (no reorder primitive), otherwise reordered into the cached buffer.
  memory weights_for(dnnl::reorder& r, const float* w, memory& cache) {
    memory user = mem(user_w_md_, w);
    if (!r) return user;
    r.execute(strm(), user, cache);
    return cache;
  }

  memory::desc src_md_, dst_md_, user_w_md_;
  dnnl::convolution_forward::primitive_desc fwd_pd_;
  dnnl::convolution_forward fwd_;
  dnnl::convolution_backward_data::primitive_desc bwd_d_pd_;
  dnnl::convolution_backward_data bwd_d_;
  dnnl::convolution_backward_weights::primitive_desc bwd_w_pd_;
  dnnl::convolution_backward_weights bwd_w_;
  memory fwd_w_, bwd_w_in_, dw_opaque_;
  dnnl::reorder to_fwd_, to_bwd_, from_dw_;
};

class DnnlBatchNorm final : public BatchNormOp {
 public:
  DnnlBatchNorm(int n, int c, int h, int w, bool relu, float momentum, float eps, DType t)
      : m_(n * h * w),
        c_(c),
        relu_(relu),
        momentum_(momentum),
        mean_(c),
        var_(c),
        dg_(c),
        db_(c),
        zeros_(c, 0.f) {
    data_md_ = memory::desc({n, c, h, w}, act_dt(t), tag::nhwc);
    vec_md_ = memory::desc({c}, dt::f32, tag::a);
    auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    if (relu) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
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
    if (relu) ws_ = memory(train_pd_.workspace_desc(), eng());
  }

  void forward(const Act* x, const float* gamma, const float* beta, float* rm, float* rv, Act* y,
               bool training) override {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(data_md_, x)},
                                         {DNNL_ARG_DST, mem(data_md_, y)},
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
  }

  void backward(const Act* x, const Act*, const Act* dy, const float* gamma, Act* dx,
                float* dgamma, float* dbeta) override {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(data_md_, x)},
                                         {DNNL_ARG_DIFF_DST, mem(data_md_, dy)},
                                         {DNNL_ARG_MEAN, mem(vec_md_, mean_.data())},
                                         {DNNL_ARG_VARIANCE, mem(vec_md_, var_.data())},
                                         {DNNL_ARG_SCALE, mem(vec_md_, gamma)},
                                         {DNNL_ARG_SHIFT, mem(vec_md_, zeros_.data())},
                                         {DNNL_ARG_DIFF_SRC, mem(data_md_, dx)},
                                         {DNNL_ARG_DIFF_SCALE, mem(vec_md_, dg_.data())},
                                         {DNNL_ARG_DIFF_SHIFT, mem(vec_md_, db_.data())}};
    if (relu_) args.insert({DNNL_ARG_WORKSPACE, ws_});
    bwd_.execute(strm(), args);
    strm().wait();
    for (int i = 0; i < c_; ++i) dgamma[i] += dg_[i], dbeta[i] += db_[i];
  }

 private:
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
  DnnlMaxPool(const PoolShape& s, DType t) {
    src_md_ = memory::desc({s.n, s.c, s.h, s.w}, act_dt(t), tag::nhwc);
    dst_md_ = memory::desc({s.n, s.c, s.oh(), s.ow()}, act_dt(t), tag::nhwc);
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
    fwd_.execute(strm(), {{DNNL_ARG_SRC, mem(src_md_, x)},
                          {DNNL_ARG_DST, mem(dst_md_, y)},
                          {DNNL_ARG_WORKSPACE, ws_}});
    strm().wait();
  }
  void backward(const Act*, const Act* dy, Act* dx) override {
    bwd_.execute(strm(), {{DNNL_ARG_DIFF_DST, mem(dst_md_, dy)},
                          {DNNL_ARG_WORKSPACE, ws_},
                          {DNNL_ARG_DIFF_SRC, mem(src_md_, dx)}});
    strm().wait();
  }

 private:
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
  explicit CpuBackend(DType t) : HostBackend(t) {}
  std::string name() const override { return "cpu"; }
  std::unique_ptr<ConvOp> conv2d(const ConvShape& s) override {
    return std::make_unique<DnnlConv>(s, dtype());
  }
  std::unique_ptr<BatchNormOp> batchnorm(int n, int c, int h, int w, bool relu, float momentum,
                                         float eps) override {
    return std::make_unique<DnnlBatchNorm>(n, c, h, w, relu, momentum, eps, dtype());
  }
  std::unique_ptr<MaxPoolOp> maxpool(const PoolShape& s) override {
    return std::make_unique<DnnlMaxPool>(s, dtype());
  }
  std::unique_ptr<LinearOp> linear(int n, int in, int out) override {
    return std::make_unique<BlasLinear>(*this, n, in, out);
  }
  void relu_forward(const Act* x, Act* y, size_t count) override {
    Relu& r = relu(count);
    r.fwd.execute(strm(), {{DNNL_ARG_SRC, mem(r.md, x)}, {DNNL_ARG_DST, mem(r.md, y)}});
    strm().wait();
  }
  void relu_backward(const Act* y, const Act* dy, Act* dx, size_t count) override {
    Relu& r = relu(count);
    r.bwd.execute(strm(), {{DNNL_ARG_DST, mem(r.md, y)},
                           {DNNL_ARG_DIFF_DST, mem(r.md, dy)},
                           {DNNL_ARG_DIFF_SRC, mem(r.md, dx)}});
    strm().wait();
  }
  void add(const Act* a, const Act* b, Act* y, size_t count) override {
    const float* af = as_f32(a, count, sa_);
    const float* bf = as_f32(b, count, sb_);
    float* out = f32_out(y, count, sy_);
#pragma omp parallel for simd schedule(static) if (count > kParallelMin)
    for (size_t i = 0; i < count; ++i) out[i] = af[i] + bf[i];
    store(out, y, count);
  }
  void avgpool_forward(const Act* xa, Act* ya, int n, int c, int hw) override {
    const float* x = as_f32(xa, size_t(n) * c * hw, sa_);
    float* y = f32_out(ya, size_t(n) * c, sy_);
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
    const float* dy = as_f32(dya, size_t(n) * c, sa_);
    float* dx = f32_out(dxa, size_t(n) * c * hw, sy_);
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
    r.md = memory::desc({memory::dim(count)}, act_dt(dtype()), tag::a);
    dnnl::eltwise_forward::desc fd(dnnl::prop_kind::forward_training,
                                   dnnl::algorithm::eltwise_relu_use_dst_for_bwd, r.md, 0.f);
    dnnl::eltwise_forward::primitive_desc fpd(fd, eng());
    r.fwd = dnnl::eltwise_forward(fpd);
    dnnl::eltwise_backward::desc bd(dnnl::algorithm::eltwise_relu_use_dst_for_bwd, r.md, r.md, 0.f);
    r.bwd = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(bd, eng(), fpd));
    return relu_.emplace(count, std::move(r)).first->second;
  }
  std::unordered_map<size_t, Relu> relu_;
  std::vector<float> sa_, sb_, sy_;  // bf16 staging of the small ops
};

// Whether oneDNN (2.6) runs bf16 here: natively where the ISA has AVX512-BF16 (or AMX); on
// plain AVX-512 by emulation; not at all below AVX-512 (its bf16 kernels need AVX-512).
bool dnnl_bf16(bool native, std::string* why) {
  const int isa = int(dnnl::get_effective_cpu_isa());
  const int bf16_isa = int(dnnl::cpu_isa::avx512_core_bf16);
  if ((isa & bf16_isa) == bf16_isa) return true;
  if (!native) {
    try {  // emulated bf16: can oneDNN make a bf16 convolution on this CPU at all?
      memory::desc a({1, 8, 4, 4}, dt::bf16, tag::nhwc), w({8, 8, 3, 3}, dt::bf16, tag::any);
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training,
                                        dnnl::algorithm::convolution_direct, a, w, a, {1, 1},
                                        {1, 1}, {1, 1});
      dnnl::convolution_forward::primitive_desc pd(d, eng());
      return true;
    } catch (const dnnl::error&) {
    }
  }
  if (why)
    *why = native ? "this CPU has no native bf16 (oneDNN needs AVX512-BF16 or AMX)"
                  : "oneDNN has no bf16 kernels for this CPU (they need AVX-512)";
  return false;
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(DType dtype) {
  return std::make_unique<CpuBackend>(dtype);
}

bool cpu_backend_supports(DType dtype, bool native, std::string* why) {
  if (dtype == DType::f32) return true;
  static const bool emulated = dnnl_bf16(false, nullptr), hardware = dnnl_bf16(true, nullptr);
  if (native ? hardware : emulated) return true;
  return dnnl_bf16(native, why);
}

}  // namespace sieve::nn
