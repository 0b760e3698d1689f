// extract_features: the trained model in eval mode over every train (and test) sample;
// each rank computes a contiguous slice and all ranks write it collectively.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "config/sections.hpp"
#include "data/dataset_file.hpp"
#include "io/atomic_output.hpp"
#include "io/h5.hpp"
#include "io/lineage.hpp"
#include "io/output_set.hpp"
#include "io/schemas.hpp"
#include "nn/backend.hpp"
#include "train/checkpoint.hpp"
#include "train/crossfit.hpp"
#include "train/loader.hpp"
#include "train/programs.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace sieve::train {

void add_features_flags(po::options_description& d) {
  d.add_options()("dataset", po::value<std::string>(),
                  "dataset file (default: <run.dir>/dataset.h5)")(
      "model", po::value<std::string>(),
      "model file (default: by features.model, <run.dir>/pretrain/model_early.h5 or model.h5)")(
      "output", po::value<std::string>(), "features file (default: <run.dir>/features.h5)");
}

namespace {

// Softmax of logits z [K] into p, in double: probabilities of 1e-30 stay > 0.
void softmax_into(const float* z, int K, double* p) {
  const float mx = *std::max_element(z, z + K);
  double sum = 0;
  for (int k = 0; k < K; ++k) sum += p[k] = std::exp(double(z[k] - mx));
  for (int k = 0; k < K; ++k) p[k] /= sum;
}

// Mirrors each image of the batch left to right in place (the [n, C, H, W] rows).
void mirror_batch(Batch* b, int64_t n, const DatasetMeta& meta) {
  const int64_t w = meta.width;
  const int64_t rows = n * meta.channels * meta.height;
  for (int64_t r = 0; r < rows; ++r) std::reverse(b->x.begin() + r * w, b->x.begin() + (r + 1) * w);
}

// Forward rows `rows` of `d` in eval mode in batches; features (when `feats` is given) and
// softmax probabilities of row r land at row r of feats [d.n, F] and probs [d.n, K]. With
// `mirror`, each image is also passed mirrored and the two passes' features and probabilities
// are averaged (test-time augmentation with the flip pretrain trained with: a mirrored
// garment is the same garment, so the average is the model's view of the image rather than
// of one of its two equally likely poses).
void forward_rows(nn::Model& m, const SplitData& d, const DatasetMeta& meta, int64_t batch,
                  const std::vector<int64_t>& rows, bool mirror, float* feats, float* probs) {
  const int F = m.feature_dim();
  const int K = m.num_classes();
  const int passes = mirror ? 2 : 1;
  Batch b;
  std::vector<double> f_sum, p_sum, p(size_t(K), 0.0);
  const int64_t total = int64_t(rows.size());
  for (int64_t i = 0; i < total; i += batch) {
    const int n = int(std::min<int64_t>(batch, total - i));
    const int64_t* idx = rows.data() + i;
    make_batch(d, meta, idx, n, Augmentation{}, 0, 0, &b);
    f_sum.assign(size_t(n) * F, 0.0);
    p_sum.assign(size_t(n) * K, 0.0);
    for (int pass = 0; pass < passes; ++pass) {
      if (pass == 1) mirror_batch(&b, n, meta);
      const float* logits = m.forward(b.x.data(), n, false);
      const float* f = m.features();
      for (int r = 0; r < n; ++r) {
        if (feats)
          for (int j = 0; j < F; ++j) f_sum[size_t(r) * F + j] += f[size_t(r) * F + j];
        softmax_into(logits + size_t(r) * K, K, p.data());
        for (int k = 0; k < K; ++k) p_sum[size_t(r) * K + k] += p[size_t(k)];
      }
    }
    for (int r = 0; r < n; ++r) {
      if (feats)
        for (int j = 0; j < F; ++j)
          feats[size_t(idx[r]) * F + j] = float(f_sum[size_t(r) * F + j] / passes);
      for (int k = 0; k < K; ++k)
        probs[size_t(idx[r]) * K + k] = float(p_sum[size_t(r) * K + k] / passes);
    }
  }
}

// Every row of `d`: features and probabilities of `m`; with cross-fitting, the training rows'
// probabilities are replaced by those of the fold model that did not train on them
// (`first_row`: d's first row in the split, `fold_of` its rows' folds).
void forward_block(nn::Model& m, const SplitData& d, const DatasetMeta& meta, int64_t batch,
                   bool mirror, const OutOfFold* oof, int64_t first_row, std::vector<float>* feats,
                   std::vector<float>* probs, std::vector<int32_t>* fold_of) {
  feats->resize(size_t(d.n) * m.feature_dim());
  probs->resize(size_t(d.n) * m.num_classes());
  std::vector<int64_t> rows(size_t(d.n));
  for (int64_t i = 0; i < d.n; ++i) rows[size_t(i)] = i;
  forward_rows(m, d, meta, batch, rows, mirror, feats->data(), probs->data());
  if (!oof) return;
  fold_of->assign(oof->fold.begin() + first_row, oof->fold.begin() + first_row + d.n);
  for (int k = 0; k < oof->folds; ++k) {
    rows.clear();
    for (int64_t i = 0; i < d.n; ++i)
      if ((*fold_of)[size_t(i)] == k) rows.push_back(i);
    forward_rows(*oof->models[size_t(k)], d, meta, batch, rows, mirror, nullptr, probs->data());
  }
}

// The model to embed with: --model, else features.model (auto: the early model when pretrain
// wrote one). Returns its path; `choice` says which ("--model", "early" or "final").
std::string choose_model(ToolContext& ctx, const RunPaths& rp, std::string* choice) {
  std::string model_path = ctx.flag("model");
  *choice = "--model";
  if (model_path.empty()) {
    *choice = ctx.cfg.get_string("features.model");
    if (*choice == "auto") *choice = fs::exists(rp.early_model()) ? "early" : "final";
    model_path = *choice == "early" ? rp.early_model() : rp.model();
    if (*choice == "early" && !fs::exists(model_path))
      throw Error(cat("features.model=early: ", model_path,
                      " does not exist (pretrain writes it when pretrain.holdout > 0)"));
    log::info(cat("features from the ", *choice, " model ", model_path,
                  *choice == "early" ? " (held-out accuracy peak)" : ""));
  }
  // model.h5 and model_early.h5 are one pretrain run's set (io/output_set.hpp): a pair of
  // different runs (left by an older Sieve, or a crash while the set was committed) is
  // refused rather than embedded from.
  const fs::path mp(model_path);
  std::string base = mp.stem().string();
  if (base.ends_with("_early")) base.resize(base.size() - 6);
  check_same_run({(mp.parent_path() / (base + ".h5")).string(),
                  (mp.parent_path() / (base + "_early.h5")).string()});
  return model_path;
}

// The model's input must be the dataset's samples. Features from a model trained on other
// data are legitimate (transfer), but rarely what the pipeline means: say so once.
void check_model_fits(const nn::Model& model, const std::string& model_path,
                      const lineage::Lineage& of_model, const data::DatasetFile& ds,
                      const std::string& dataset) {
  const auto& sp = model.spec();
  const bool ok = ds.is_image() ? (sp.in_features == 0 && sp.in_channels == ds.channels() &&
                                   sp.in_height == ds.height() && sp.in_width == ds.width())
                                : sp.in_features == ds.features();
  SIEVE_CHECK(ok, model_path, ": model input ",
              sp.in_features ? cat("[", sp.in_features, "]")
                             : cat("[", sp.in_channels, ",", sp.in_height, ",", sp.in_width, "]"),
              " does not match the samples of ", dataset);
  const std::string& trained_on = of_model.dataset_fingerprint;
  if (!trained_on.empty() && !ds.fingerprint().empty() && trained_on != ds.fingerprint())
    log::warn(cat(model_path, " was trained on another dataset (", trained_on, ") than ", dataset,
                  " (", ds.fingerprint(), "); extracting anyway"));
}

// features.flip_average: whether each image is also passed mirrored. auto: where the model
// was trained with the flip (its recorded config's pretrain.augment and augment_flip), so that
// it has learnt a mirrored image as the same class; a model without a recorded config is not
// mirrored.
bool flip_average(const Config& cfg, const std::string& model_path, const data::DatasetFile& ds) {
  const std::string v = cfg.get_string("features.flip_average");
  if (v == "off") return false;
  if (v == "on" && !ds.is_image())
    throw UsageError(
        "config key 'features.flip_average' = on: the dataset holds table rows, "
        "not images (expected auto or off)");
  bool on = v == "on";
  if (v == "auto" && ds.is_image()) {
    const std::optional<Config> trained = stored_config(model_path, cfg.schema());
    on = trained && trained->get_bool("pretrain.augment") &&
         trained->get_bool("pretrain.augment_flip");
  }
  if (on)
    log::info("each image also passed mirrored, the two passes averaged (features.flip_average)");
  return on;
}

// What the features file says of itself: the model, its choice, precision and what
// /train/probs are (docs/formats.md: the detectors' and the report's reading of them).
void write_attributes(h5::File& f, const nn::Model& model, const std::string& model_path,
                      const std::string& model_choice, nn::DType dtype, const std::string& backend,
                      int64_t num_classes, const std::optional<OutOfFold>& oof) {
  f.set_attr("/", "layer", std::string("penultimate"));
  f.set_attr("/", "model", model_path);
  f.set_attr("/", "model_choice", model_choice);
  f.set_attr("/", "arch", model.spec().arch);
  f.set_attr("/", "precision", std::string(nn::dtype_name(dtype)));
  f.set_attr("/", "backend", backend);
  f.set_attr("/", "feature_dim", int64_t(model.feature_dim()));
  f.set_attr("/", "num_classes", num_classes);
  f.set_attr("/", "probs_source", std::string(oof ? "out_of_fold" : "in_sample"));
  f.set_attr("/", "folds", int64_t(oof ? oof->folds : 0));
  if (oof) f.set_attr("/", "fold_models", oof->choice);
}

// One split: each rank forwards its contiguous rows a block at a time (streamed: a rank's
// memory does not grow with the dataset) and all ranks write every block collectively.
// Each collective write's outcome is agreed on: a rank whose write failed (disk full hits
// the rank writing the highest offsets first) must not leave the others inside the next
// collective; all ranks then fail with its one line and the temporary file is removed.
void embed_split(const Comm& comm, h5::File& f, nn::Model& model, const data::DatasetFile& ds,
                 const DatasetMeta& meta, data::Split s, int64_t batch, int64_t block, bool mirror,
                 const OutOfFold* use_oof) {
  auto agreed = [&](auto&& step) { agreed_step(comm, step); };
  const int F = model.feature_dim();
  const int K = model.num_classes();
  const std::string g = "/" + std::string(data::split_name(s));
  const int64_t n = ds.rows(s);
  f.create_dataset<float>(g + "/features", {hsize_t(n), hsize_t(F)}, 4096);
  f.create_dataset<float>(g + "/probs", {hsize_t(n), hsize_t(K)}, 4096);
  f.create_dataset<int32_t>(g + "/labels", {hsize_t(n)});
  f.create_dataset<int64_t>(g + "/sample_id", {hsize_t(n)});
  if (use_oof) f.create_dataset<int32_t>(g + "/fold", {hsize_t(n)});
  const Range mine = block_range(n, comm.rank(), comm.size());
  // Every write is collective: the same number of blocks on every rank (the last ones
  // may be empty on a rank with fewer rows).
  const int64_t blocks = comm.allreduce_max((mine.size() + block - 1) / block);
  log::Progress prog(cat("features ", data::split_name(s)), n, "images");
  std::vector<float> feats, probs;
  std::vector<int32_t> fold_of;
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t a = std::min(mine.end, mine.begin + k * block);
    const int64_t b = std::min(mine.end, a + block);
    const SplitData d = read_rows(ds, s, a, b);
    forward_block(model, d, meta, batch, mirror, use_oof, a, &feats, &probs, &fold_of);
    const hsize_t r0 = hsize_t(a), cnt = hsize_t(b - a);
    if (use_oof) agreed([&] { f.write_rows<int32_t>(g + "/fold", r0, cnt, fold_of.data()); });
    agreed([&] { f.write_rows<float>(g + "/features", r0, cnt, feats.data()); });
    agreed([&] { f.write_rows<float>(g + "/probs", r0, cnt, probs.data()); });
    agreed([&] { f.write_rows<int32_t>(g + "/labels", r0, cnt, d.labels.data()); });
    agreed([&] { f.write_rows<int64_t>(g + "/sample_id", r0, cnt, d.sample_id.data()); });
    prog.update(std::min(n, (b - mine.begin) * comm.size()));
  }
  prog.finish();
}

}  // namespace

// The stage as named phases: choose the model, load it (and the fold models), check it fits
// the dataset, write the attributes, embed each split, commit.
void extract_features_main(ToolContext& ctx) {
  const RunPaths rp = run_paths(ctx.cfg);
  const std::string dataset = ctx.path_flag("dataset", rp.dataset());
  std::string model_choice;
  const std::string model_path = choose_model(ctx, rp, &model_choice);
  const std::string output = ctx.path_flag("output", rp.features());
  const int64_t batch = ctx.cfg.get_int("features.batch");
  AtomicOutput out(output, ctx.overwrite, ctx.comm);
  check_resolved_config_path(config_sidecar_path(output));

  const std::string backend = ctx.cfg.get_string("features.backend");
  std::string note;
  const nn::DType dtype = nn::resolve_precision(ctx.cfg.get_string("features.precision"), backend,
                                                "features.precision", &note);
  if (!note.empty()) log::info(note);
  auto model = load_model(model_path, backend, dtype);
  const DatasetMeta meta = read_dataset_meta(dataset);
  const data::DatasetFile ds = data::DatasetFile::open(dataset);
  // Cross-fitted fold models beside the model (pretrain.folds): the training split's
  // probabilities out of fold. The features stay the model's: K models embed in K spaces.
  const std::optional<OutOfFold> oof =
      load_out_of_fold(ctx.cfg, model_path, ds, meta.fingerprint, backend, dtype);
  if (oof)
    log::info(cat("training probabilities out of fold: ", oof->folds, " ", oof->choice,
                  " fold models (", fs::path(oof->paths.front()).filename().string(), " ...)"));
  std::vector<data::Split> splits = {data::Split::Train};
  if (ctx.cfg.get_bool("features.test") && ds.rows(data::Split::Test) > 0)
    splits.push_back(data::Split::Test);
  const lineage::Lineage of_model = lineage::lineage_of(model_path);
  check_model_fits(*model, model_path, of_model, ds, dataset);
  const bool mirror = flip_average(ctx.cfg, model_path, ds);

  h5::File f = h5::File::create(out.tmp_path(), &ctx.comm);
  h5::stamp(f, schema::kFeatures, ctx.cfg.to_yaml());
  lineage::stamp_derived(
      f, schema::kFeatures, ctx.cfg.to_yaml(),
      {{of_model.inputs.front(), {dataset, meta.fingerprint}}, meta.fingerprint, ""});
  write_attributes(f, *model, model_path, model_choice, dtype, backend, meta.num_classes, oof);
  f.set_attr("/", "flip_average", int64_t(mirror));
  const int64_t row_bytes = ds.row_bytes();
  const int64_t block_cfg = ctx.cfg.get_int("features.block_samples");
  const int64_t block =
      block_cfg > 0 ? block_cfg
                    : std::max<int64_t>(batch, (int64_t(64) << 20) /
                                                   std::max<int64_t>(1, row_bytes) / batch * batch);
  for (data::Split s : splits)
    embed_split(ctx.comm, f, *model, ds, meta, s, batch, block, mirror,
                oof && s == data::Split::Train ? &*oof : nullptr);
  agreed_step(ctx.comm, [&] { f.close(); });
  out.commit();
  if (ctx.comm.is_root()) write_resolved_config(config_sidecar_path(output), ctx.cfg.to_yaml());
  log::info(cat("wrote ", output, ": ", model->feature_dim(), "-dim features of ",
                ds.rows(data::Split::Train), " train",
                splits.size() > 1 ? cat(" + ", ds.rows(data::Split::Test), " test") : std::string(),
                " samples"));
}

}  // namespace sieve::train
