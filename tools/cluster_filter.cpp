// cluster_filter: flag noise per class in an embedding (or any float [N,d] dataset with
// labels and sample ids) by DBSCAN, GMM or k-means; write the keep-mask, the matched
// random control and the per-class table (docs/formats.md: sieve.filter/1).
#include <cmath>
#include <filesystem>

#include "cluster/filter.hpp"
#include "config/sections.hpp"
#include "config/tool.hpp"
#include "io/atomic_output.hpp"
#include "io/h5.hpp"
#include "io/schemas.hpp"
#include "util/log.hpp"

using namespace sieve;

namespace {

struct Input {
  std::vector<float> x;  // [n, d]
  std::vector<int32_t> labels;
  std::vector<int64_t> ids;
  int64_t n = 0;
  int d = 0;
};

Input read_input(const std::string& path, const std::string& dataset) {
  h5::File f = h5::File::open(path);
  SIEVE_CHECK(f.has_attr("/", "schema"), path,
              ": not a Sieve file (no 'schema' attribute); expected ", schema::kEmbedding, ", ",
              schema::kFeatures, " or ", schema::kDataset);
  std::string s = f.attr_string("/", "schema");
  SIEVE_CHECK(s == schema::kEmbedding || s == schema::kFeatures || s == schema::kDataset, path,
              ": schema '", s, "', expected ", schema::kEmbedding, ", ", schema::kFeatures, " or ",
              schema::kDataset);
  std::string group = dataset.substr(0, dataset.find_last_of('/'));
  std::string labels = group + "/labels", ids = group + "/sample_id";
  SIEVE_CHECK(f.exists(dataset), path, ": no dataset '", dataset,
              "' (choose one with --input-dataset or filter.input_dataset)");
  SIEVE_CHECK(f.exists(labels), path, ": missing dataset '", labels, "' (int32 [N] class labels)");
  SIEVE_CHECK(f.exists(ids), path, ": missing dataset '", ids, "' (int64 [N] sample ids)");
  auto dims = f.require<float>(dataset, 2);
  auto ldims = f.require<int32_t>(labels, 1);
  auto idims = f.require<int64_t>(ids, 1);
  SIEVE_CHECK(ldims[0] == dims[0] && idims[0] == dims[0], path, ": mismatched lengths: ", dataset,
              " has ", dims[0], " rows, ", labels, " ", ldims[0], ", ", ids, " ", idims[0]);
  Input in;
  in.n = int64_t(dims[0]);
  in.d = int(dims[1]);
  SIEVE_CHECK(in.n > 0, path, ": ", dataset, " is empty (0 samples)");
  SIEVE_CHECK(in.d > 0, path, ": ", dataset, " has 0 columns");
  in.x = f.read_all<float>(dataset);
  in.labels = f.read_all<int32_t>(labels);
  in.ids = f.read_all<int64_t>(ids);
  for (int64_t i = 0; i < in.n * in.d; ++i)
    SIEVE_CHECK(std::isfinite(in.x[i]), path, ": ", dataset, " row ", i / in.d, " column ",
                i % in.d, " is NaN or infinite (", in.x[i], ")");
  for (int64_t i = 0; i < in.n; ++i)
    SIEVE_CHECK(in.labels[i] >= 0, path, ": ", labels, " row ", i, " is negative (", in.labels[i],
                "); expected class indices >= 0");
  return in;
}

template <typename T>
void put(h5::File& f, const std::string& name, const std::vector<T>& v) {
  f.create_dataset<T>(name, {hsize_t(v.size())});
  f.write_rows<T>(name, 0, v.size(), v.data());
}

}  // namespace

int main(int argc, char** argv) {
  ToolSpec spec{
      "cluster_filter", "flag noise per class (DBSCAN / GMM / k-means) and write keep-masks",
      "  cluster_filter --config run.yaml\n"
      "  cluster_filter --input features.h5 --input-dataset /train/features "
      "--set filter.method=gmm\n"
      "  mpirun -n 4 cluster_filter --config run.yaml --set filter.dbscan.auto_eps=true\n"};
  auto flags = [](po::options_description& o) {
    o.add_options()("input,i", po::value<std::string>(),
                    "embedding file (default: run.dir/embedding.h5)")(
        "input-dataset", po::value<std::string>(),
        "float [N,d] dataset to cluster (default: filter.input_dataset)")(
        "output,o", po::value<std::string>(), "filter file (default: run.dir/filter.h5)")(
        "truth", po::value<std::string>(),
        "dataset file with /train/noise_truth and /train/sample_id (default: run.dir/dataset.h5 "
        "when it exists)");
  };
  return run_tool(argc, argv, spec, flags, [](ToolContext& ctx) {
    const RunPaths paths = run_paths(ctx.cfg);
    std::string input = ctx.has_flag("input") ? ctx.flag("input") : paths.embedding();
    std::string output = ctx.has_flag("output") ? ctx.flag("output") : paths.filter();
    std::string dataset = ctx.has_flag("input-dataset")
                              ? ctx.flag("input-dataset")
                              : ctx.cfg.get_string("filter.input_dataset");
    if (dataset.empty() || dataset[0] != '/') dataset = "/" + dataset;
    std::string truth = ctx.has_flag("truth") ? ctx.flag("truth") : "";
    if (truth.empty() && std::filesystem::exists(paths.dataset())) truth = paths.dataset();
    if (ctx.has_flag("truth") && !std::filesystem::exists(truth))
      throw UsageError(cat("--truth ", truth, ": no such file"));
    cluster::FilterOptions opt = cluster::filter_options(ctx.cfg);
    AtomicOutput out(output, ctx.overwrite, ctx.comm);  // fails before any work

    Input in = read_input(input, dataset);
    log::infof("read ", in.n, " points of dimension ", in.d, " from ", input, ":", dataset);
    cluster::FilterResult res =
        cluster::run_filter(ctx.comm, in.x.data(), in.n, in.d, in.labels.data(), opt);
    log::infof("method ", opt.method, ": ", res.clusters, " clusters, ", res.noise, " of ", in.n,
               " samples flagged as noise (", 100.0 * double(res.noise) / double(in.n), " %)");
    log::info("per-class table:\n" + cluster::format_table(res.table));

    bool have_truth = false;
    cluster::NoiseScore score;
    if (!truth.empty()) {
      h5::File tf = h5::File::open(truth);
      if (tf.exists("/train/noise_truth")) {
        tf.require<uint8_t>("/train/noise_truth", 1);
        tf.require<int64_t>("/train/sample_id", 1);
        score = cluster::score_noise(in.ids, res.keep, tf.read_all<int64_t>("/train/sample_id"),
                                     tf.read_all<uint8_t>("/train/noise_truth"));
        SIEVE_CHECK(score.matched > 0, truth, ": no /train/sample_id matches the input's ids");
        have_truth = true;
        log::infof("noise flags vs ground truth (", score.matched,
                   " samples joined on sample_id): ", "precision ", score.precision, ", recall ",
                   score.recall, " (", score.hits, " of ", score.flagged, " flagged are noise; ",
                   score.truth, " noisy in truth)");
      } else {
        log::infof(truth, " has no /train/noise_truth: precision/recall not reported");
      }
    }

    if (ctx.comm.is_root()) {
      h5::File f = h5::File::create(out.tmp_path());
      put(f, "/cluster", res.cluster);
      put(f, "/keep", res.keep);
      put(f, "/random_keep", res.random_keep);
      put(f, "/sample_id", in.ids);
      put(f, "/labels", in.labels);
      f.create_group("/per_class");
      std::vector<int32_t> cls;
      std::vector<int64_t> samples, clusters, noise;
      std::vector<double> pct;
      for (const auto& r : res.table) {
        cls.push_back(r.cls);
        samples.push_back(r.samples);
        clusters.push_back(r.clusters);
        noise.push_back(r.noise);
        pct.push_back(r.removed_pct);
      }
      put(f, "/per_class/class", cls);
      put(f, "/per_class/samples", samples);
      put(f, "/per_class/clusters", clusters);
      put(f, "/per_class/noise", noise);
      put(f, "/per_class/removed_pct", pct);
      f.set_attr("/", "method", opt.method);
      f.set_attr("/", "eps", res.eps);
      f.set_attr("/", "eps_auto", int64_t(opt.method == "dbscan" && opt.auto_eps));
      f.set_attr("/", "min_samples", opt.dbscan.min_samples);
      f.set_attr("/", "per_class", int64_t(opt.per_class));
      f.set_attr("/", "input", input);
      f.set_attr("/", "input_dataset", dataset);
      if (opt.method == "gmm") f.set_attr("/", "log_likelihood", res.log_likelihood);
      if (have_truth) {
        f.set_attr("/", "noise_precision", score.precision);
        f.set_attr("/", "noise_recall", score.recall);
      }
      h5::stamp(f, schema::kFilter, ctx.cfg.to_yaml());
      f.close();
      write_text_atomic(config_sidecar_path(output), ctx.cfg.to_yaml());
    }
    out.commit();
    log::infof("wrote ", output);
  });
}
