#include "report/run_data.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include "io/atomic_output.hpp"
#include "io/h5.hpp"
#include "io/lineage.hpp"
#include "io/schemas.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace sieve::report {
namespace {

// Typed field access with errors that name the file and the field.
const Json* field(const Json& j, const std::string& key, const std::string& path, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) throw Error(cat(path, ": field '", key, "' missing"));
    return nullptr;
  }
  return &*it;
}

double num(const Json& j, const std::string& key, const std::string& path, bool required) {
  const Json* v = field(j, key, path, required);
  if (!v) return kNaN;
  if (!v->is_number())
    throw Error(cat(path, ": field '", key, "': expected a number, found ", v->type_name()));
  return v->get<double>();
}

int64_t integer(const Json& j, const std::string& key, const std::string& path, bool required,
                int64_t def) {
  const Json* v = field(j, key, path, required);
  if (!v) return def;
  if (!v->is_number_integer() && !v->is_number_unsigned())
    throw Error(cat(path, ": field '", key, "': expected an integer, found ", v->type_name()));
  return v->get<int64_t>();
}

std::string text(const Json& j, const std::string& key, const std::string& path, std::string def) {
  const Json* v = field(j, key, path, false);
  if (!v) return def;
  if (!v->is_string())
    throw Error(cat(path, ": field '", key, "': expected a string, found ", v->type_name()));
  return v->get<std::string>();
}

// pretrain/model_early.json (one JSON line; a torn or empty file counts as absent).
EarlyModelInfo load_early_model(const std::string& path) {
  EarlyModelInfo e;
  if (!fs::exists(path)) return e;
  const std::vector<Json> lines = read_json_lines(path);
  if (lines.empty()) return e;
  const Json& j = lines.back();
  SIEVE_CHECK(j.is_object(), path, ": expected one JSON object");
  e.present = true;
  e.epoch = num(j, "epoch", path, false);
  e.holdout_acc = num(j, "holdout_acc", path, false);
  e.peak_acc = num(j, "peak_acc", path, false);
  e.peak_epoch = num(j, "peak_epoch", path, false);
  e.train_acc = num(j, "train_acc", path, false);
  e.guarded_epoch = num(j, "guarded_epoch", path, false);
  e.guarded_train_acc = num(j, "guarded_train_acc", path, false);
  e.pick = text(j, "pick", path, e.pick);
  e.loss = text(j, "loss", path, e.loss);
  if (const Json* m = field(j, "memorised", path, false)) {
    SIEVE_CHECK(m->is_boolean(), path, ": field 'memorised': expected a boolean, found ",
                m->type_name());
    e.memorised = m->get<bool>() ? 1 : 0;
  }
  if (const Json* f = field(j, "first_pass", path, false)) {
    SIEVE_CHECK(f->is_object(), path, ": field 'first_pass': expected an object, found ",
                f->type_name());
    const std::string where = path + " (first_pass)";
    e.first_train_acc = num(*f, "train_acc", where, true);
    e.first_peak_acc = num(*f, "peak_acc", where, true);
    e.first_elapsed_s = num(*f, "elapsed_s", where, false);
    e.first_guarded_epoch = num(*f, "guarded_epoch", where, false);
    e.first_guarded_train_acc = num(*f, "guarded_train_acc", where, false);
  }
  return e;
}

// "sweep": {"global_batch": "64"} (train_scaled writes the grid's text) or a number.
int64_t requested_batch(const Json& j, const std::string& path, int64_t actual) {
  auto sw = j.find("sweep");
  if (sw == j.end() || !sw->is_object()) return actual;
  auto gb = sw->find("global_batch");
  if (gb == sw->end() || gb->is_null()) return actual;
  if (gb->is_number_integer() || gb->is_number_unsigned()) return gb->get<int64_t>();
  if (gb->is_string()) {
    const std::string t = gb->get<std::string>();
    try {
      size_t used = 0;
      int64_t v = std::stoll(t, &used);
      if (used == t.size() && v > 0) return v;
    } catch (const std::exception&) {
    }
  }
  throw Error(
      cat(path, ": field 'sweep/global_batch': expected a positive integer, found ", gb->dump()));
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SIEVE_CHECK(in, path, ": cannot read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void load_dataset(RunData& d) {
  DatasetInfo& ds = d.dataset;
  ds.path = d.run_dir + "/dataset.h5";
  if (!fs::exists(ds.path)) {
    d.notes.push_back("no dataset.h5: class names, data size and thumbnails are not available");
    return;
  }
  auto f = h5::File::open(ds.path);
  h5::require_schema(f, schema::kDataset);
  ds.present = true;
  ds.fingerprint = lineage::fingerprint_of(f);
  ds.num_classes = f.attr_int("/", "num_classes");
  if (f.has_attr("/", "class_names")) ds.class_names = f.attr_strings("/", "class_names");
  ds.kind = f.has_attr("/", "kind") ? f.attr_string("/", "kind") : "image";
  ds.source = f.has_attr("/", "source") ? f.attr_string("/", "source") : "";
  ds.n_train = int64_t(f.require<int32_t>("/train/labels", 1)[0]);
  if (f.exists("/test/labels")) ds.n_test = int64_t(f.require<int32_t>("/test/labels", 1)[0]);
  if (f.exists("/train/images")) {
    auto dims = f.require<uint8_t>("/train/images", 4);
    SIEVE_CHECK(int64_t(dims[0]) == ds.n_train, ds.path, ": /train/images has ", dims[0],
                " rows but /train/labels ", ds.n_train);
    ds.sample_shape = {int64_t(dims[1]), int64_t(dims[2]), int64_t(dims[3])};
    ds.bytes_per_sample = int64_t(dims[1] * dims[2] * dims[3]);
  } else if (f.exists("/train/features")) {
    auto dims = f.require<float>("/train/features", 2);
    ds.sample_shape = {int64_t(dims[1])};
    ds.bytes_per_sample = int64_t(4 * dims[1]);
  } else {
    throw Error(cat(ds.path, ": neither /train/images nor /train/features present"));
  }
  ds.has_noise_truth = f.exists("/train/noise_truth");
  if (ds.has_noise_truth) {
    SIEVE_CHECK(int64_t(f.require<uint8_t>("/train/noise_truth", 1)[0]) == ds.n_train &&
                    int64_t(f.require<int64_t>("/train/sample_id", 1)[0]) == ds.n_train,
                ds.path, ": /train/noise_truth and /train/sample_id must have ", ds.n_train,
                " rows");
    ds.noise_truth = f.read_all<uint8_t>("/train/noise_truth");
    ds.train_sample_id = f.read_all<int64_t>("/train/sample_id");
  }
  if (f.has_attr("/", "label_noise_kind")) {
    ds.injected_kind = f.attr_string("/", "label_noise_kind");
    ds.injected_rate = f.attr_double("/", "label_noise_rate");
  }
}

// A file the report joins with the dataset by sample_id must come from that dataset.
void require_lineage(const RunData& d, const h5::File& f) {
  if (d.dataset.present)
    lineage::require_same_dataset(f.path(), lineage::dataset_fingerprint_of(f), d.dataset.path,
                                  d.dataset.fingerprint);
}

void load_features(RunData& d) {
  FeaturesInfo& fi = d.features;
  fi.path = d.run_dir + "/features.h5";
  if (!fs::exists(fi.path)) {
    d.notes.push_back("no features.h5 (extract_features has not run)");
    return;
  }
  auto f = h5::File::open(fi.path);
  h5::require_schema(f, schema::kFeatures);
  require_lineage(d, f);
  auto dims = f.require<float>("/train/features", 2);
  fi.present = true;
  fi.n = int64_t(dims[0]);
  fi.dim = int64_t(dims[1]);
  if (f.has_attr("/", "layer")) fi.layer = f.attr_string("/", "layer");
  if (f.has_attr("/", "model")) fi.model = f.attr_string("/", "model");
}

double attr_or_nan_at(const h5::File& f, const std::string& obj, const std::string& name) {
  return f.has_attr(obj, name) ? f.attr_double(obj, name) : kNaN;
}

double attr_or_nan(const h5::File& f, const std::string& name) {
  return attr_or_nan_at(f, "/", name);
}

void load_embedding(RunData& d) {
  EmbeddingInfo& e = d.embedding;
  e.path = d.run_dir + "/embedding.h5";
  if (!fs::exists(e.path)) {
    d.notes.push_back("no embedding.h5: t-SNE scatter and interactive view omitted");
    return;
  }
  auto f = h5::File::open(e.path);
  h5::require_schema(f, schema::kEmbedding);
  require_lineage(d, f);
  auto dims = f.require<float>("/embedding", 2);
  e.n = int64_t(dims[0]);
  e.dims = int64_t(dims[1]);
  SIEVE_CHECK(e.dims >= 2, e.path, ": /embedding: expected at least 2 columns, found ", e.dims);
  f.require<int32_t>("/labels", 1);
  f.require<int64_t>("/sample_id", 1);
  e.points = f.read_all<float>("/embedding");
  e.labels = f.read_all<int32_t>("/labels");
  e.sample_id = f.read_all<int64_t>("/sample_id");
  SIEVE_CHECK(int64_t(e.labels.size()) == e.n && int64_t(e.sample_id.size()) == e.n, e.path,
              ": /labels and /sample_id must have ", e.n, " rows like /embedding");
  e.method = f.has_attr("/", "method") ? f.attr_string("/", "method") : "";
  e.perplexity = attr_or_nan(f, "perplexity");
  e.kl_divergence = attr_or_nan(f, "kl_divergence");
  e.knn_preservation = attr_or_nan(f, "knn_preservation");
  e.trustworthiness = attr_or_nan(f, "trustworthiness");
  e.present = true;
}

// A 1-D integer column stored as int32 or int64 (docs/formats.md leaves the width open).
std::vector<int64_t> int_column(const h5::File& f, const std::string& name) {
  if (f.exists(name) && f.dtype(name) == "int32") {
    f.require<int32_t>(name, 1);
    auto v = f.read_all<int32_t>(name);
    return std::vector<int64_t>(v.begin(), v.end());
  }
  f.require<int64_t>(name, 1);  // the error names the file, the dataset and what was found
  return f.read_all<int64_t>(name);
}

void load_filter(RunData& d) {
  FilterInfo& fi = d.filter;
  fi.path = d.run_dir + "/filter.h5";
  if (!fs::exists(fi.path)) {
    d.notes.push_back("no filter.h5: data-reduction table and noise highlighting omitted");
    return;
  }
  auto f = h5::File::open(fi.path);
  h5::require_schema(f, schema::kFilter);
  require_lineage(d, f);
  fi.fingerprint = lineage::fingerprint_of(f);
  auto n = f.require<int32_t>("/cluster", 1)[0];
  f.require<uint8_t>("/keep", 1);
  f.require<int64_t>("/sample_id", 1);
  fi.cluster = f.read_all<int32_t>("/cluster");
  fi.keep = f.read_all<uint8_t>("/keep");
  fi.sample_id = f.read_all<int64_t>("/sample_id");
  SIEVE_CHECK(fi.keep.size() == n && fi.sample_id.size() == n, fi.path,
              ": /keep and /sample_id must have ", n, " rows like /cluster");
  const std::string pc = "/per_class/";
  if (f.exists("/per_class")) {
    auto cls = int_column(f, pc + "class"), smp = int_column(f, pc + "samples"),
         clu = int_column(f, pc + "clusters"), noi = int_column(f, pc + "noise");
    const size_t rows = cls.size();
    for (auto* col : {&smp, &clu, &noi})
      SIEVE_CHECK(col->size() == rows, fi.path, ": ", pc, "{samples,clusters,noise}: expected ",
                  rows, " rows like ", pc, "class");
    SIEVE_CHECK(f.require<double>(pc + "removed_pct", 1)[0] == rows, fi.path, ": ", pc,
                "removed_pct: expected ", rows, " rows");
    auto pct = f.read_all<double>(pc + "removed_pct");
    for (size_t i = 0; i < cls.size(); ++i)
      fi.per_class.push_back({cls[i], smp[i], clu[i], noi[i], pct[i]});
  } else {
    d.notes.push_back(cat(fi.path, " has no /per_class table: per-class rows omitted"));
  }
  fi.method = f.has_attr("/", "method") ? f.attr_string("/", "method") : "";
  fi.eps = attr_or_nan(f, "eps");
  fi.min_samples = f.has_attr("/", "min_samples") ? f.attr_int("/", "min_samples") : 0;
  fi.noise_precision = attr_or_nan(f, "noise_precision");
  fi.noise_recall = attr_or_nan(f, "noise_recall");
  // The detectors cluster_filter ran: the chosen one first, then in the order the file lists
  // them (files before that list: the detectors of that time, in a fixed order).
  std::vector<std::string> order = {fi.method};
  const std::vector<std::string> listed =
      f.has_attr("/", "detectors")
          ? f.attr_strings("/", "detectors")
          : std::vector<std::string>{"knn", "confident", "dbscan", "gmm", "kmeans"};
  order.insert(order.end(), listed.begin(), listed.end());
  if (f.exists("/noise_estimate")) {
    if (f.has_attr("/noise_estimate", "total"))
      fi.noise_estimate = f.attr_int("/noise_estimate", "total");
    if (f.has_attr("/noise_estimate", "truth"))
      fi.noise_truth = f.attr_int("/noise_estimate", "truth");
    if (f.has_attr("/noise_estimate", "flag_total"))
      fi.noise_flag_total = f.attr_int("/noise_estimate", "flag_total");
    if (f.has_attr("/noise_estimate", "noise_rate"))
      fi.noise_rate_given = f.attr_double("/noise_estimate", "noise_rate");
    if (f.has_attr("/noise_estimate", "heldout_peak_accuracy"))
      fi.heldout_peak = f.attr_double("/noise_estimate", "heldout_peak_accuracy");
    if (f.has_attr("/noise_estimate", "in_doubt"))
      fi.estimate_in_doubt = f.attr_int("/noise_estimate", "in_doubt") != 0;
    if (f.has_attr("/noise_estimate", "test_split_wrong")) {
      fi.test_split_wrong = f.attr_double("/noise_estimate", "test_split_wrong");
      fi.test_split_standard_error = f.attr_double("/noise_estimate", "test_split_standard_error");
      fi.test_split_cap = f.attr_int("/noise_estimate", "test_split_cap");
      if (f.has_attr("/noise_estimate", "test_split_follows_model"))
        fi.test_split_follows_model =
            f.attr_int("/noise_estimate", "test_split_follows_model") != 0;
      if (f.has_attr("/noise_estimate", "test_split_raise"))
        fi.test_split_raise = f.attr_int("/noise_estimate", "test_split_raise");
      if (f.has_attr("/noise_estimate", "transition_source"))
        fi.transition_source = f.attr_string("/noise_estimate", "transition_source");
      if (f.exists("/noise_estimate/test_split_class_cap"))
        fi.test_split_class_cap = f.read_all<int64_t>("/noise_estimate/test_split_class_cap");
    }
  }
  if (f.has_attr("/", "probs_source")) fi.probs_source = f.attr_string("/", "probs_source");
  if (const std::string csv = label_issues_path(fi.path); fs::exists(csv)) fi.label_issues = csv;
  for (size_t k = 0; k < order.size(); ++k) {
    const std::string& m = order[k];
    const std::string g = "/detectors/" + m;
    if (m.empty() || std::find(order.begin(), order.begin() + k, m) != order.begin() + k ||
        !f.exists(g))
      continue;
    DetectorInfo di;
    di.method = m;
    di.inputs = f.has_attr(g, "inputs") ? f.attr_string(g, "inputs") : "";
    di.description = f.has_attr(g, "description") ? f.attr_string(g, "description") : "";
    di.flagged = f.has_attr(g, "flagged") ? f.attr_int(g, "flagged") : 0;
    if (f.has_attr(g, "f1")) {
      di.hits = f.attr_int(g, "hits");
      di.truth = f.attr_int(g, "truth");
      di.precision = f.attr_double(g, "precision");
      di.recall = f.attr_double(g, "recall");
      di.f1 = f.attr_double(g, "f1");
      di.average_precision = f.attr_double(g, "average_precision");
      di.auroc = attr_or_nan_at(f, g, "auroc");
    }
    if (f.exists(g + "/pr")) {
      auto dims = f.require<float>(g + "/pr", 2);
      SIEVE_CHECK(dims[1] == 3, fi.path, ": ", g,
                  "/pr: expected [points, 3] (threshold, "
                  "precision, recall), found ",
                  dims[1], " columns");
      di.pr = f.read_all<float>(g + "/pr");
    }
    fi.detectors.push_back(std::move(di));
  }
  fi.present = true;
}

void load_runs(RunData& d, const Config* grid) {
  if (!fs::is_directory(d.sweep_dir)) {
    d.notes.push_back(cat("no sweep directory ", d.sweep_dir,
                          ": accuracy-vs-batch and throughput sections omitted"));
    return;
  }
  std::optional<Sweep> sweep;
  if (grid) sweep.emplace(*grid);
  static const std::regex run_re("run-([0-9]+)");
  for (auto& ent : fs::directory_iterator(d.sweep_dir)) {
    std::smatch m;
    std::string name = ent.path().filename().string();
    if (!ent.is_directory() || !std::regex_match(name, m, run_re)) continue;
    std::string rpath = ent.path().string() + "/result.json";
    if (!fs::exists(rpath)) {
      d.notes.push_back(cat(ent.path().string(), ": no result.json (run unfinished), skipped"));
      continue;
    }
    Json j;
    try {
      j = Json::parse(slurp(rpath));
    } catch (const Json::parse_error& e) {
      throw Error(cat(rpath, ": not valid JSON (", e.what(), ")"));
    }
    RunResult r = parse_result(j, rpath);
    if (d.dataset.present)
      lineage::require_same_dataset(rpath, r.dataset_fingerprint, d.dataset.path,
                                    d.dataset.fingerprint);
    r.index = std::stoll(m[1].str());
    if (sweep) {
      std::string why = why_stale(r, *sweep, *grid, d.filter.fingerprint);
      if (!why.empty()) {
        d.stale.push_back({r.index, rpath, why});
        continue;
      }
    }
    std::string mpath = ent.path().string() + "/metrics.jsonl";
    if (fs::exists(mpath)) r.epochs_logged = read_json_lines(mpath).size();
    d.runs.push_back(r);
  }
  std::sort(d.runs.begin(), d.runs.end(),
            [](const RunResult& a, const RunResult& b) { return a.index < b.index; });
  std::sort(d.stale.begin(), d.stale.end(),
            [](const StaleResult& a, const StaleResult& b) { return a.index < b.index; });
  if (!d.stale.empty())
    log::warn(cat(d.stale.size(), " result", d.stale.size() == 1 ? "" : "s", " in ", d.sweep_dir,
                  " not of the current sweep grid, left out (listed in the report), e.g. ",
                  d.stale[0].path, ": ", d.stale[0].why));
  if (d.runs.empty())
    d.notes.push_back(cat("no finished runs", d.stale.empty() ? "" : " of the current sweep grid",
                          " in ", d.sweep_dir));
}

}  // namespace

RunResult parse_result(const Json& j, const std::string& path) {
  SIEVE_CHECK(j.is_object(), path, ": expected a JSON object, found ", j.type_name());
  RunResult r;
  r.path = path;
  const Json* arm = field(j, "arm", path, true);
  SIEVE_CHECK(arm->is_string(), path, ": field 'arm': expected a string, found ", arm->type_name());
  r.arm = arm->get<std::string>();
  SIEVE_CHECK(r.arm == "full" || r.arm == "filtered" || r.arm == "random", path,
              ": field 'arm': expected full, filtered or random, found '", r.arm, "'");
  r.global_batch = integer(j, "global_batch", path, true, 0);
  SIEVE_CHECK(r.global_batch > 0, path, ": field 'global_batch' must be positive");
  r.requested_batch = requested_batch(j, path, r.global_batch);
  if (const Json* dv = field(j, "diverged", path, false)) {
    SIEVE_CHECK(dv->is_boolean(), path, ": field 'diverged': expected a boolean, found ",
                dv->type_name());
    r.diverged = dv->get<bool>();
  }
  // A diverged run has no final accuracy (null), nor has a run without a test split (null;
  // -1 from older versions); the key itself is always written.
  SIEVE_CHECK(j.contains("final_test_acc"), path, ": field 'final_test_acc' missing");
  r.final_test_acc = num(j, "final_test_acc", path, false);
  if (r.diverged) {
    r.final_test_acc = kNaN;
    r.diverged_at_step = integer(j, "diverged_at_step", path, false, -1);
    r.last_eval_test_acc = num(j, "last_eval_test_acc", path, false);
    if (r.last_eval_test_acc < 0) r.last_eval_test_acc = kNaN;
  }
  r.num_classes = integer(j, "num_classes", path, false, 0);
  r.ranks = integer(j, "ranks", path, false, 1);
  SIEVE_CHECK(r.ranks > 0, path, ": field 'ranks' must be positive");
  r.seed = integer(j, "seed", path, false, 0);
  r.per_rank_batch = integer(j, "per_rank_batch", path, false, r.global_batch / r.ranks);
  r.samples = integer(j, "samples_used", path, false, integer(j, "samples", path, false, -1));
  r.best_test_acc = num(j, "best_test_acc", path, false);
  r.train_acc = num(j, "train_acc", path, false);
  r.train_acc_clean = num(j, "train_acc_clean", path, false);
  r.gen_gap = num(j, "gen_gap", path, false);
  r.time_to_best_s = num(j, "time_to_best_s", path, false);
  r.images_per_s = num(j, "images_per_s", path, false);
  r.images_per_s_per_rank = num(j, "images_per_s_per_rank", path, false);
  if (std::isnan(r.images_per_s_per_rank) && !std::isnan(r.images_per_s))
    r.images_per_s_per_rank = r.images_per_s / double(r.ranks);
  r.weight_decay = num(j, "weight_decay", path, false);
  for (auto [key, into] : {std::pair{"dataset_fingerprint", &r.dataset_fingerprint},
                           std::pair{"filter_fingerprint", &r.filter_fingerprint},
                           std::pair{"precision", &r.precision}})
    if (const Json* fp = field(j, key, path, false)) {
      SIEVE_CHECK(fp->is_string(), path, ": field '", key, "': expected a string, found ",
                  fp->type_name());
      *into = fp->get<std::string>();
    }
  r.epochs = integer(j, "epochs", path, false, 0);
  r.steps = integer(j, "steps", path, false, 0);
  if (const Json* c = field(j, "config", path, false))
    SIEVE_CHECK(c->is_object(), path, ": field 'config': expected an object, found ",
                c->type_name());
  r.recorded = recorded_result_keys(j);
  r.lr = num(j, "lr", path, false);
  // A run without a test split reports null (-1 before): "no accuracy", not 0 %. Its gap
  // is missing too (older versions wrote 0.0 there, a number nobody measured).
  if (r.final_test_acc < 0) r.final_test_acc = kNaN;
  if (r.best_test_acc < 0) r.best_test_acc = kNaN;
  if (std::isnan(r.final_test_acc))
    r.gen_gap = kNaN;
  else if (std::isnan(r.gen_gap))
    r.gen_gap = r.train_acc - r.final_test_acc;
  return r;
}

std::string why_stale(const RunResult& r, const Sweep& sweep, const Config& cfg,
                      const std::string& filter_fingerprint) {
  ResultKeys rec = r.recorded;
  if (rec.empty()) {
    // An older train_scaled recorded no config: match on the fields every result.json has.
    rec["scaled.arm"] = r.arm;
    rec["scaled.global_batch"] = std::to_string(r.requested_batch);
    if (!std::isnan(r.weight_decay))
      rec["scaled.optimizer.weight_decay"] = format_float(r.weight_decay);
    if (r.epochs > 0) rec["scaled.epochs"] = std::to_string(r.epochs);
    // Its "seed" is the one trained with: derived from run.seed where the grid says 0.
    if (r.index >= 0 && r.index < sweep.size() &&
        sweep.apply(cfg, r.index).get_int("scaled.seed") != 0)
      rec["scaled.seed"] = std::to_string(r.seed);
  }
  std::string why = stale_reason(sweep, cfg, r.index, rec);
  if (why.empty() && r.arm != "full" && !r.filter_fingerprint.empty() &&
      !filter_fingerprint.empty() && r.filter_fingerprint != filter_fingerprint)
    why = "trained on another filter.h5 (its filter_fingerprint is not the present file's)";
  return why;
}

RunData load_run(const std::string& run_dir, const std::string& sweep_dir, const Config* grid) {
  RunData d;
  d.run_dir = run_dir;
  d.sweep_dir = sweep_dir;
  SIEVE_CHECK(fs::is_directory(run_dir), run_dir, ": run directory does not exist");
  load_dataset(d);
  d.pretrain_metrics_path = run_dir + "/pretrain/metrics.jsonl";
  if (fs::exists(d.pretrain_metrics_path))
    d.pretrain_metrics = read_json_lines(d.pretrain_metrics_path);
  else
    d.notes.push_back("no pretrain/metrics.jsonl: pretraining curve omitted");
  d.pretrain_first_metrics_path = run_dir + "/pretrain/metrics_first_pass.jsonl";
  if (fs::exists(d.pretrain_first_metrics_path))
    d.pretrain_first_metrics = read_json_lines(d.pretrain_first_metrics_path);
  d.pretrain_early = load_early_model(run_dir + "/pretrain/model_early.json");
  load_features(d);
  load_embedding(d);
  load_filter(d);
  load_runs(d, grid);
  mark_runs(d.runs, d.dataset.present ? d.dataset.num_classes : 0);
  return d;
}

std::string RunResult::mark() const {
  if (diverged) return "diverged";
  if (collapsed) return "collapsed (near chance)";
  return "";
}

void mark_runs(std::vector<RunResult>& runs, int64_t classes) {
  for (auto& r : runs) {
    const int64_t k = classes > 0 ? classes : r.num_classes;
    if (k <= 0) continue;
    r.chance = 1.0 / double(k);
    r.collapsed = !r.diverged && !std::isnan(r.final_test_acc) &&
                  r.final_test_acc <= kCollapseFactor * r.chance;
  }
}

std::string class_name(const RunData& d, int64_t k) {
  if (k >= 0 && k < int64_t(d.dataset.class_names.size())) return d.dataset.class_names[k];
  return cat("class ", k);
}

}  // namespace sieve::report
