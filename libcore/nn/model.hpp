// The model seam between the training engine's math (libcore/nn) and the trainer
// (libcore/train: optimizers, data-parallel gradient reduction, checkpoints).
//
// What the trainer sees of a model:
//   * ONE flat fp32 buffer of parameters and ONE of gradients with the same layout, on the
//     backend's device (host memory for "cpu"/"ref"; params_to_host/params_from_host copy). Each
//     parameter is a named slice (ParamInfo) whose name is the torchvision state_dict name, so
//     checkpoints are interchangeable with PyTorch by name and shape, and optimizers (LARS/LAMB)
//     can treat BN weights and biases differently. One buffer means one allreduce / one
//     optimizer loop over contiguous memory.
//   * Non-trainable state (BN running mean/var, num_batches_tracked) as BufferInfo views, for
//     checkpoints and for broadcasting from rank 0.
//   * forward(x) -> logits, backward(dlogits) -> grads accumulate into grads(); x, logits,
//     dlogits and features are host fp32 whatever the device and activation dtype (the
//     backend converts at the edges: Backend::load_input / act_to_host). While backward
//     runs, a hook reports which gradient ranges are final (last layer first), so gradient
//     buckets can be reduced while the rest of backward still runs (overlap).
//
// Layout of the flat buffer: parameters in the order the layers are constructed (the order of
// a torchvision state_dict), each slice 16-float aligned. Backward produces gradients in
// reverse of that order, so "ready" ranges walk from the end of the buffer to its start.
//
// Threading: a Model is not thread-safe; it uses OpenMP/oneDNN threads inside each call.
// Determinism: same spec, seed and thread count give bitwise-identical outputs and grads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/tensor.hpp"
#include "util/trace.hpp"

namespace sieve {
class Config;
}

namespace sieve::nn {

class Backend;

// What to build. Filled from config (pretrain section) by the trainer.
struct ModelSpec {
  std::string arch = "resnet18";  // "mlp", "resnet18", "resnet34", "resnet50", "resnet101",
                                  // "resnet152"
  double width = 1.0;             // width multiplier: ResNet base widths 64,128,256,512 scaled
                                  // (each rounded, at least 1 channel)
  std::string stem = "cifar";     // "cifar": 3x3 conv stride 1, no max-pool;
                                  // "imagenet": 7x7 conv stride 2 + 3x3/2 max-pool
  int num_classes = 10;
  int in_channels = 3, in_height = 32, in_width = 32;  // image input [N, C, H, W] (NCHW)
  int in_features = 0;  // > 0: tabular input [N, F] (MLP only; images are flattened otherwise)
  std::vector<int> mlp_hidden = {256};  // MLP hidden widths: {256} = 2 FC layers (fc1, fc2)
  // ResNet: the last BN of every residual block starts with weight (gamma) 0, so that each
  // block starts as the identity (init_params).
  bool zero_init_residual = false;
  std::string backend = "cpu";  // op backend: "cpu" (oneDNN + OpenBLAS), "ref" (naive loops,
                                // for tests), "cuda"; see backend.hpp for the list
  DType dtype = DType::f32;     // activation dtype (bf16: mixed precision, fp32 master
                                // weights); resolve_precision() maps the config's precision
};

// The architecture keys of a training section (`<section>.model.arch`, `.width`, `.stem`,
// `.hidden`; section "pretrain" or "train"), the one reading of them for the trainer and the
// report's estimates. The rest of the spec stays the caller's: the input shape and classes
// come from the dataset, backend and dtype from `<section>.backend` and `.precision` (the
// estimates build on the host whatever the run's backend).
ModelSpec model_spec_from(const Config& cfg, const std::string& section);

// One named parameter inside the flat params()/grads() buffers.
struct ParamInfo {
  std::string name;             // torchvision state_dict name: "conv1.weight",
                                // "layer1.0.bn1.weight", "fc.bias"
  size_t offset = 0, size = 0;  // in floats, into params()/grads()
  std::vector<int64_t> shape;   // conv OIHW, linear [out, in], BN/bias [C]
  bool is_bn_or_bias = false;   // excluded from LARS trust ratio / optional weight decay
};

// Non-trainable state: BN running_mean / running_var (float) and num_batches_tracked (stored
// as one float holding an integer count; PyTorch stores int64 — converters cast by name).
struct BufferInfo {
  std::string name;       // "bn1.running_mean", "layer1.0.bn1.num_batches_tracked"
  float* data = nullptr;  // on the model's device (buffer_to_host / buffer_from_host copy)
  size_t size = 0;
  std::vector<int64_t> shape;
};

// A trainable network. Public calls check shapes and then run the virtual *_impl.
class Model {
 public:
  virtual ~Model() = default;

  // Device pointers (host memory on the CPU backends).
  float* params() { return params_.data(); }  // [num_params], layout: param_info()
  float* grads() { return grads_.data(); }    // [num_params], same layout
  const float* params() const { return params_.data(); }
  const float* grads() const { return grads_.data(); }
  size_t num_params() const { return params_.size(); }
  // Host copies of the flat buffers and of one BufferInfo (plain copies on the CPU).
  std::vector<float> params_to_host() const;
  std::vector<float> grads_to_host() const;
  void params_from_host(const float* host);  // num_params() floats
  void buffer_to_host(const BufferInfo& b, float* host) const;
  void buffer_from_host(const BufferInfo& b, const float* host);

  Backend& backend() const { return *backend_; }
  Device device() const { return params_.device(); }
  DType dtype() const { return spec_.dtype; }
  const std::vector<ParamInfo>& param_info() const { return info_; }
  virtual std::vector<BufferInfo> buffers() = 0;  // views into the model's own storage

  // x: [n, C, H, W] host float NCHW (or [n, F] tabular); returns host logits
  // [n, num_classes] in fp32, owned by the model and valid until the next forward. training=true:
  // BN uses batch statistics and updates running stats (momentum 0.1, unbiased running var, as
  // PyTorch); caches what backward needs. training=false: BN uses running stats.
  const float* forward(const float* x, int n, bool training);

  // dlogits: [n, num_classes] for the n of the last training forward. Parameter gradients
  // ACCUMULATE (+=) into grads(); call zero_grad() between steps. Calls the grad-ready hook
  // (if set) with (offset, count) ranges of grads() that are final: each call is exactly one
  // parameter's slice (ParamInfo offset/size, never alignment padding), every parameter once,
  // in descending offset order (last layer first).
  void backward(const float* dlogits);

  void set_grad_ready_hook(std::function<void(size_t offset, size_t count)> hook) {
    hook_ = std::move(hook);
  }
  void zero_grad();

  // Timing of the model's top-level units for the step timeline (--trace): ResNet conv1,
  // bn1, [maxpool], layer1.0 ... layer4.N (whole residual blocks), avgpool, fc; MLP fc1 ...
  // The unit of a parameter is its name up to the block ("layer2.1.conv1.weight" ->
  // "layer2.1") or up to the first dot ("fc.bias" -> "fc"). Called with the unit's start and
  // end (trace::now_us) for every training forward and every backward; null = off (one
  // branch per unit). On a device the spans time the host side (kernel launches) only.
  using UnitHook = void (*)(const char* unit, bool backward, double t0_us, double t1_us);
  void set_unit_hook(UnitHook hook) { unit_hook_ = hook; }

  // Penultimate activations [n, feature_dim] of the last forward (after global pooling for
  // ResNets, after the last hidden ReLU for the MLP), as host fp32: the embedding the filter
  // stage uses. Valid until the next forward or features() call.
  const float* features();
  virtual int feature_dim() const = 0;
  int num_classes() const { return spec_.num_classes; }
  const ModelSpec& spec() const { return spec_; }
  int last_batch() const { return last_n_; }  // n of the last forward

  // Floats per input sample: C*H*W, or in_features.
  size_t input_size() const;

 protected:
  explicit Model(ModelSpec spec) : spec_(std::move(spec)) {}
  // x is the host input (the model loads it with Backend::load_input); returns the logits
  // activations. backward_impl gets the dlogits activations.
  virtual const void* forward_impl(const float* x, int n, bool training) = 0;
  virtual void backward_impl(const void* dlogits) = 0;
  virtual const void* features_act() const = 0;
  // Subclasses register parameters while building; returns the offset in floats.
  size_t add_param(const std::string& name, std::vector<int64_t> shape, bool is_bn_or_bias);
  // Called once after all add_param calls: allocates params_/grads_ (zeroed) on be's device.
  void finalize_params(Backend& be);
  // Times one unit (see set_unit_hook) from construction to destruction.
  class UnitScope {
   public:
    UnitScope(const Model& m, const char* unit, bool backward)
        : hook_(backward || m.last_training_ ? m.unit_hook_ : nullptr),
          unit_(unit),
          backward_(backward),
          t0_(hook_ ? trace::now_us() : 0.0) {}
    ~UnitScope() {
      if (hook_) hook_(unit_, backward_, t0_, trace::now_us());
    }
    UnitScope(const UnitScope&) = delete;
    UnitScope& operator=(const UnitScope&) = delete;

   private:
    UnitHook hook_;
    const char* unit_;
    bool backward_;
    double t0_;
  };
  // Reports a layer's parameter slices to the hook, last slice first.
  void grad_ready(const std::vector<std::pair<size_t, size_t>>& ranges) {
    if (hook_)
      for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) hook_(it->first, it->second);
  }

  ModelSpec spec_;
  std::vector<ParamInfo> info_;
  Backend* backend_ = nullptr;
  Tensor params_, grads_;  // fp32, on the backend's device
  Tensor dlogits_;         // activations of the backend's dtype
  std::vector<float> logits_host_, features_host_;
  std::function<void(size_t, size_t)> hook_;
  UnitHook unit_hook_ = nullptr;
  int last_n_ = 0;
  bool last_training_ = false;

 private:
  size_t next_offset_ = 0;
};

// Builds the model (parameters zero until init_params). Throws UsageError naming the spec
// field for an unknown arch/stem/backend or a non-positive size.
std::unique_ptr<Model> make_model(const ModelSpec& spec);

// Deterministic initialisation from a seed, as torchvision: conv weights Kaiming normal
// (fan_out, ReLU gain); BN weight 1, bias 0 (running mean 0, var 1); Linear weight and bias
// uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)); with spec().zero_init_residual, the weight of the
// last BN of each residual block 0 (torchvision's zero_init_residual; Goyal et al. 2017,
// section 5.1: every block starts as the identity, which steadies the first steps of
// large-batch training). Independent of thread count.
void init_params(Model& model, uint64_t seed);

// Softmax cross-entropy with label smoothing eps (target = (1-eps)*onehot + eps/k).
// logits [n, k]; labels [n] in [0, k). Returns the mean loss; writes dlogits [n, k] (already
// divided by n) if non-null; counts correct argmax predictions into *correct if non-null.
double softmax_cross_entropy(const float* logits, const int32_t* labels, int n, int k,
                             float label_smoothing, float* dlogits, int* correct);

// Generalized cross-entropy (Zhang & Sabuncu 2018): (1 - p_y^q) / q, between the
// cross-entropy (q -> 0) and the mean absolute error (q = 1). Its gradient is the
// cross-entropy's scaled by p_y^q per sample, so samples the model does not (yet) agree
// with, wrong labels among them, pull less: the network fits them later, if at all.
// Same arguments and outputs as softmax_cross_entropy; q in (0, 1].
double generalized_cross_entropy(const float* logits, const int32_t* labels, int n, int k, float q,
                                 float* dlogits, int* correct);

}  // namespace sieve::nn
