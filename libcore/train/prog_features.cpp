// extract_features: the trained model in eval mode over every train (and test) sample;
// each rank computes a contiguous slice and all ranks write it collectively.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "config/sections.hpp"
#include "io/atomic_output.hpp"
#include "io/h5.hpp"
#include "io/lineage.hpp"
#include "io/schemas.hpp"
#include "train/checkpoint.hpp"
#include "train/loader.hpp"
#include "train/programs.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace sieve::train {

void add_features_flags(po::options_description& d) {
  d.add_options()
      ("dataset", po::value<std::string>(), "dataset file (default: <run.dir>/dataset.h5)")
      ("model", po::value<std::string>(),
       "model file (default: by features.model, <run.dir>/pretrain/model_early.h5 or model.h5)")
      ("output", po::value<std::string>(), "features file (default: <run.dir>/features.h5)");
}

namespace {

struct SplitFeatures {
  Range rows;
  std::vector<float> feats;  // [rows, F]
  std::vector<float> probs;  // [rows, classes]: softmax of the logits
};

// Forward this rank's slice of `d` in eval mode; features() after each batch.
SplitFeatures run_split(nn::Model& m, const SplitData& d, const DatasetMeta& meta,
                        int64_t batch, const Comm& comm, const std::string& name) {
  SplitFeatures out;
  out.rows = block_range(d.n, comm.rank(), comm.size());
  const int F = m.feature_dim();
  const int K = m.num_classes();
  out.feats.resize(size_t(out.rows.size()) * F);
  out.probs.resize(size_t(out.rows.size()) * K);
  log::Progress prog("features " + name, out.rows.size() * comm.size(), "images");
  Batch b;
  std::vector<int64_t> idx;
  for (int64_t i = out.rows.begin; i < out.rows.end; i += batch) {
    const int n = int(std::min<int64_t>(batch, out.rows.end - i));
    idx.resize(size_t(n));
    for (int j = 0; j < n; ++j) idx[size_t(j)] = i + j;
    make_batch(d, meta, idx.data(), n, false, 0, 0, &b);
    const float* logits = m.forward(b.x.data(), n, false);
    const float* f = m.features();
    std::copy(f, f + size_t(n) * F, out.feats.data() + size_t(i - out.rows.begin) * F);
    float* p = out.probs.data() + size_t(i - out.rows.begin) * K;
    for (int r = 0; r < n; ++r) {  // softmax in double: probabilities of 1e-30 stay > 0
      const float* z = logits + size_t(r) * K;
      const float mx = *std::max_element(z, z + K);
      double sum = 0;
      for (int k = 0; k < K; ++k) sum += std::exp(double(z[k] - mx));
      for (int k = 0; k < K; ++k) p[size_t(r) * K + k] = float(std::exp(double(z[k] - mx)) / sum);
    }
    prog.update((i + n - out.rows.begin) * comm.size());
  }
  prog.finish();
  return out;
}

}  // namespace

void extract_features_main(ToolContext& ctx) {
  const RunPaths rp = run_paths(ctx.cfg);
  auto flag_or = [&](const char* f, const std::string& def) {
    std::string v = ctx.flag(f);
    return v.empty() ? def : v;
  };
  const std::string dataset = flag_or("dataset", rp.dataset());
  std::string model_path = ctx.flag("model");
  std::string model_choice = "--model";
  if (model_path.empty()) {
    model_choice = ctx.cfg.get_string("features.model");
    if (model_choice == "auto") model_choice = fs::exists(rp.early_model()) ? "early" : "final";
    model_path = model_choice == "early" ? rp.early_model() : rp.model();
    if (model_choice == "early" && !fs::exists(model_path))
      throw Error(cat("features.model=early: ", model_path,
                           " does not exist (pretrain writes it when pretrain.holdout > 0)"));
    log::info(cat("features from the ", model_choice, " model ", model_path,
                  model_choice == "early" ? " (held-out accuracy peak)" : ""));
  }
  const std::string output = flag_or("output", rp.features());
  const int64_t batch = ctx.cfg.get_int("features.batch");
  AtomicOutput out(output, ctx.overwrite, ctx.comm);

  auto model = load_model(model_path);
  const DatasetMeta meta = read_dataset_meta(dataset);
  std::vector<std::string> splits = {"train"};
  if (ctx.cfg.get_bool("features.test") && has_split(dataset, "test")) splits.push_back("test");

  std::vector<SplitData> data;
  for (auto& s : splits) {
    data.push_back(read_split(dataset, s));
    const SplitData& d = data.back();
    const auto& sp = model->spec();
    const bool ok = d.image ? (sp.in_features == 0 && sp.in_channels == d.c &&
                               sp.in_height == d.h && sp.in_width == d.w)
                            : sp.in_features == d.f;
    SIEVE_CHECK(ok, model_path, ": model input ",
                sp.in_features ? cat("[", sp.in_features, "]")
                               : cat("[", sp.in_channels, ",", sp.in_height, ",", sp.in_width, "]"),
                " does not match ", dataset, " /", s, " samples");
  }
  // Features from a model trained on other data are legitimate (transfer), but rarely what
  // the pipeline means: say so once.
  const lineage::Input model_in = lineage::input_of(model_path);
  {
    const std::string trained_on = lineage::dataset_fingerprint_of(h5::File::open(model_path));
    if (!trained_on.empty() && !meta.fingerprint.empty() && trained_on != meta.fingerprint)
      log::warn(cat(model_path, " was trained on another dataset (", trained_on, ") than ", dataset,
                    " (", meta.fingerprint, "); extracting anyway"));
  }
  const int F = model->feature_dim();
  h5::File f = h5::File::create(out.tmp_path(), &ctx.comm);
  h5::stamp(f, schema::kFeatures, ctx.cfg.to_yaml());
  lineage::stamp_derived(f, schema::kFeatures, ctx.cfg.to_yaml(),
                         {{model_in, {dataset, meta.fingerprint}}, meta.fingerprint});
  f.set_attr("/", "layer", std::string("penultimate"));
  f.set_attr("/", "model", model_path);
  f.set_attr("/", "model_choice", model_choice);
  f.set_attr("/", "arch", model->spec().arch);
  f.set_attr("/", "feature_dim", int64_t(F));
  f.set_attr("/", "num_classes", int64_t(meta.num_classes));
  for (size_t k = 0; k < splits.size(); ++k) {
    const SplitData& d = data[k];
    const std::string g = "/" + splits[k];
    SplitFeatures sf = run_split(*model, d, meta, batch, ctx.comm, splits[k]);
    const hsize_t n = hsize_t(d.n), r0 = hsize_t(sf.rows.begin), cnt = hsize_t(sf.rows.size());
    f.create_dataset<float>(g + "/features", {n, hsize_t(F)}, 4096);
    f.create_dataset<float>(g + "/probs", {n, hsize_t(model->num_classes())}, 4096);
    f.write_rows<float>(g + "/probs", r0, cnt, sf.probs.data());
    f.create_dataset<int32_t>(g + "/labels", {n});
    f.create_dataset<int64_t>(g + "/sample_id", {n});
    f.write_rows<float>(g + "/features", r0, cnt, sf.feats.data());
    f.write_rows<int32_t>(g + "/labels", r0, cnt, d.labels.data() + r0);
    f.write_rows<int64_t>(g + "/sample_id", r0, cnt, d.sample_id.data() + r0);
  }
  f.close();
  out.commit();
  if (ctx.comm.is_root()) write_text_atomic(config_sidecar_path(output), ctx.cfg.to_yaml());
  log::info(cat("wrote ", output, ": ", F, "-dim features of ", data[0].n, " train",
                splits.size() > 1 ? cat(" + ", data[1].n, " test") : std::string(), " samples"));
}

}  // namespace sieve::train
