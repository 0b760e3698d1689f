#include "train/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "io/atomic_output.hpp"
#include "io/h5.hpp"
#include "io/output_set.hpp"
#include "io/schemas.hpp"

namespace fs = std::filesystem;

namespace sieve::train {

std::vector<ParamSlice> param_slices(const nn::Model& model) {
  std::vector<ParamSlice> out;
  for (const auto& p : model.param_info())
    out.push_back({p.name, p.offset, p.size, p.is_bn_or_bias});
  return out;
}

namespace {

std::vector<hsize_t> hdims(const std::vector<int64_t>& shape, size_t size) {
  std::vector<hsize_t> d;
  for (auto s : shape) d.push_back(hsize_t(s));
  if (d.empty()) d.push_back(hsize_t(size));
  return d;
}

void write_model_attrs(h5::File& f, nn::Model& m) {
  // The run whose output set this file belongs to (io/output_set.hpp): a resumed run
  // continues it, and readers refuse an early and a final model of different runs.
  if (!current_run_id().empty()) f.set_attr("/", "run_id", current_run_id());
  const auto& s = m.spec();
  f.set_attr("/", "arch", s.arch);
  f.set_attr("/", "width", s.width);
  f.set_attr("/", "stem", s.stem);
  f.set_attr("/", "num_classes", int64_t(s.num_classes));
  std::vector<int64_t> shape =
      s.in_features > 0 ? std::vector<int64_t>{s.in_features}
                        : std::vector<int64_t>{s.in_channels, s.in_height, s.in_width};
  f.set_attr("/", "input_shape", shape);
  f.set_attr("/", "in_features", int64_t(s.in_features));
  f.set_attr("/", "mlp_hidden", std::vector<int64_t>(s.mlp_hidden.begin(), s.mlp_hidden.end()));
  f.set_attr("/", "feature_dim", int64_t(m.feature_dim()));
  f.set_attr("/", "feature_layer", std::string("penultimate"));
  // The activation precision it was trained with; the stored weights are fp32 either way.
  f.set_attr("/", "precision", std::string(nn::dtype_name(s.dtype)));
}

void write_state(h5::File& f, nn::Model& m, const std::string& group, const float* flat) {
  f.create_group(group);
  for (const auto& p : m.param_info()) {
    std::vector<float> v(flat + p.offset, flat + p.offset + p.size);
    f.write_small<float>(group + "/" + p.name, hdims(p.shape, p.size), v);
  }
}

void write_buffers(h5::File& f, nn::Model& m, const std::string& group) {
  for (const auto& b : m.buffers()) {
    std::vector<float> v(b.size);
    m.buffer_to_host(b, v.data());
    f.write_small<float>(group + "/" + b.name, hdims(b.shape, b.size), v);
  }
}

void read_named(const h5::File& f, const std::string& name, float* dst, size_t size) {
  SIEVE_CHECK(f.exists(name), f.path(), ": missing dataset ", name,
              " (checkpoint/model of another architecture?)");
  auto v = f.read_all<float>(name);
  SIEVE_CHECK(v.size() == size, f.path(), ": ", name, " has ", v.size(), " values, expected ",
              size, " (another architecture or width?)");
  // A NaN weight would pass unnoticed where a ReLU maps it to 0: every tensor of a model or
  // checkpoint is checked as it is read (a few ms for a ResNet-18).
  const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
  SIEVE_CHECK(bad == v.end(), f.path(), ": ", name, " holds NaN/Inf (element ",
              bad - v.begin(), " of ", v.size(), ")");
  std::copy(v.begin(), v.end(), dst);
}

void read_state(const h5::File& f, nn::Model& m, const std::string& group, float* flat) {
  for (const auto& p : m.param_info()) read_named(f, group + "/" + p.name, flat + p.offset, p.size);
}

// The model's parameters from `group`, through a host copy (the model may live on a GPU).
void read_params(const h5::File& f, nn::Model& m, const std::string& group) {
  std::vector<float> host(m.num_params(), 0.f);
  read_state(f, m, group, host.data());
  m.params_from_host(host.data());
}

void read_buffers(const h5::File& f, nn::Model& m) {
  for (const auto& b : m.buffers()) {
    std::vector<float> v(b.size);
    read_named(f, "/state/" + b.name, v.data(), b.size);
    m.buffer_from_host(b, v.data());
  }
}

}  // namespace

void save_checkpoint(const std::string& path, nn::Model& model, const SgdOptimizer& opt,
                     const TrainState& st, const std::string& config_yaml, const Comm& comm) {
  AtomicOutput out(path, /*overwrite=*/true, comm, false, schema::kCheckpoint);
  on_root_agreed(comm, [&] {
    h5::File f = h5::File::create(out.tmp_path());
    h5::stamp(f, schema::kCheckpoint, config_yaml);
    write_model_attrs(f, model);
    write_state(f, model, "/state", model.params_to_host().data());
    write_buffers(f, model, "/state");
    write_state(f, model, "/optimizer", opt.momentum().data());
    f.create_group("/progress");
    f.set_attr("/progress", "epoch", st.epoch);
    f.set_attr("/progress", "step_in_epoch", st.step_in_epoch);
    f.set_attr("/progress", "step", st.step);
    f.set_attr("/progress", "seed", int64_t(st.seed));
    f.set_attr("/progress", "global_batch", st.global_batch);
    f.set_attr("/progress", "elapsed", st.elapsed_s);
    f.set_attr("/progress", "loss_sum", st.loss_sum);
    f.set_attr("/progress", "correct", st.correct);
    f.set_attr("/progress", "seen", st.seen);
    f.set_attr("/progress", "loader", st.loader);
    f.flush();
    f.set_attr("/", "done", int64_t(1));
    f.close();
  });
  out.commit();
}

TrainState load_checkpoint(const std::string& path, nn::Model& model, SgdOptimizer& opt) {
  h5::File f = h5::File::open(path);
  h5::require_schema(f, schema::kCheckpoint);
  SIEVE_CHECK(f.has_attr("/", "done") && f.attr_int("/", "done") == 1, path,
              ": checkpoint is incomplete (no done=1 attribute)");
  SIEVE_CHECK(f.attr_string("/", "arch") == model.spec().arch, path, ": checkpoint arch '",
              f.attr_string("/", "arch"), "' differs from the configured '", model.spec().arch, "'");
  read_params(f, model, "/state");
  read_buffers(f, model);
  read_state(f, model, "/optimizer", opt.momentum().data());
  TrainState st;
  st.epoch = f.attr_int("/progress", "epoch");
  st.step_in_epoch = f.attr_int("/progress", "step_in_epoch");
  st.step = f.attr_int("/progress", "step");
  st.seed = uint64_t(f.attr_int("/progress", "seed"));
  st.global_batch = f.attr_int("/progress", "global_batch");
  st.elapsed_s = f.attr_double("/progress", "elapsed");
  st.loss_sum = f.attr_double("/progress", "loss_sum");
  st.correct = f.attr_int("/progress", "correct");
  st.seen = f.attr_int("/progress", "seen");
  // Checkpoints from before streaming existed were written by the in-memory loader.
  st.loader = f.has_attr("/progress", "loader") ? f.attr_string("/progress", "loader") : "memory";
  return st;
}

std::string checkpoint_name(const std::string& dir, int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "ckpt-%09lld.h5", static_cast<long long>(step));
  return dir + "/" + buf;
}

namespace {
std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("ckpt-", 0) == 0 && n.size() > 8 && n.substr(n.size() - 3) == ".h5")
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());  // zero-padded step: lexical = numeric
  return out;
}
}  // namespace

std::string latest_checkpoint(const std::string& dir) {
  auto all = list_checkpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      h5::File f = h5::File::open(*it);
      if (f.has_attr("/", "done") && f.attr_int("/", "done") == 1) return *it;
    } catch (const Error&) {
      // unreadable (truncated copy): try the previous one
    }
  }
  return "";
}

std::string agreed_latest_checkpoint(const Comm& comm, const std::string& dir) {
  std::string ck;
  if (comm.is_root()) ck = latest_checkpoint(dir);
  comm.bcast_string(ck);
  return ck;
}

std::string agreed_checkpoint_run_id(const Comm& comm, const std::string& dir) {
  std::string id;
  if (comm.is_root())
    if (const std::string ck = latest_checkpoint(dir); !ck.empty()) id = run_id_of(ck);
  comm.bcast_string(id);
  return id;
}

void prune_checkpoints(const std::string& dir, int64_t keep) {
  auto all = list_checkpoints(dir);
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i) {
    std::error_code ec;
    fs::remove(all[i], ec);
  }
}

void save_model(const std::string& path, nn::Model& model, const std::string& config_yaml,
                const lineage::Lineage& from, bool overwrite, const Comm& comm) {
  AtomicOutput out(path, overwrite, comm, false, schema::kModel);
  on_root_agreed(comm, [&] {
    h5::File f = h5::File::create(out.tmp_path());
    h5::stamp(f, schema::kModel, config_yaml);
    lineage::stamp_derived(f, schema::kModel, config_yaml, from);
    write_model_attrs(f, model);
    write_state(f, model, "/state", model.params_to_host().data());
    write_buffers(f, model, "/state");
    f.close();
    write_resolved_config(config_sidecar_path(path), config_yaml);
  });
  out.commit();
}

nn::DType checkpoint_precision(const std::string& path) {
  h5::File f = h5::File::open(path);
  h5::require_schema(f, schema::kCheckpoint);
  if (!f.has_attr("/", "precision")) return nn::DType::f32;  // written before bf16 existed
  const std::string p = f.attr_string("/", "precision");
  SIEVE_CHECK(p == "fp32" || p == "bf16", path, ": attr precision: expected fp32 or bf16, got '", p,
              "'");
  return p == "bf16" ? nn::DType::bf16 : nn::DType::f32;
}

std::unique_ptr<nn::Model> load_model(const std::string& path, const std::string& backend,
                                      nn::DType dtype) {
  h5::File f = h5::File::open(path);
  h5::require_schema(f, schema::kModel);
  nn::ModelSpec s;
  s.arch = f.attr_string("/", "arch");
  s.width = f.attr_double("/", "width");
  s.stem = f.attr_string("/", "stem");
  s.num_classes = int(f.attr_int("/", "num_classes"));
  s.in_features = int(f.attr_int("/", "in_features"));
  auto shape = f.attr_ints("/", "input_shape");
  if (s.in_features == 0) {
    SIEVE_CHECK(shape.size() == 3, path, ": attr input_shape: expected [C,H,W]");
    s.in_channels = int(shape[0]);
    s.in_height = int(shape[1]);
    s.in_width = int(shape[2]);
  }
  auto hidden = f.attr_ints("/", "mlp_hidden");
  s.mlp_hidden.assign(hidden.begin(), hidden.end());
  s.backend = backend;
  s.dtype = dtype;
  auto m = nn::make_model(s);
  read_params(f, *m, "/state");
  read_buffers(f, *m);
  return m;
}

}  // namespace sieve::train
