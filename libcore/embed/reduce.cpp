#include "embed/reduce.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>

#include "embed/options.hpp"
#include "embed/pca.hpp"
#include "embed/quality.hpp"
#include "embed/tsne.hpp"
#include "io/atomic_output.hpp"
#include "io/h5.hpp"
#include "io/lineage.hpp"
#include "io/schemas.hpp"
#include "util/clock.hpp"
#include "util/log.hpp"

namespace sieve::embed {

FeatureBlock read_features(const Comm& comm, const std::string& path) {
  h5::File f = h5::File::open(path, &comm);
  h5::require_schema(f, schema::kFeatures);
  const std::string fx = "/train/features", fl = "/train/labels", fi = "/train/sample_id";
  auto dx = f.require<float>(fx, 2);
  auto dl = f.require<int32_t>(fl, 1);
  auto di = f.require<int64_t>(fi, 1);
  FeatureBlock b;
  b.N = int64_t(dx[0]);
  b.F = int64_t(dx[1]);
  SIEVE_CHECK(dl[0] == dx[0], path, ": ", fl, " has ", dl[0], " rows but ", fx, " has ", dx[0]);
  SIEVE_CHECK(di[0] == dx[0], path, ": ", fi, " has ", di[0], " rows but ", fx, " has ", dx[0]);
  SIEVE_CHECK(b.N >= 2 && b.F >= 1, path, ": ", fx,
              " must have at least 2 rows and 1 column, found [", b.N, ",", b.F, "]");
  b.rows = block_range(b.N, comm.rank(), comm.size());
  b.x.resize(size_t(b.rows.size() * b.F));
  f.read_rows<float>(fx, hsize_t(b.rows.begin), hsize_t(b.rows.size()), b.x.data());
  b.labels = f.read_all<int32_t>(fl);
  b.sample_id = f.read_all<int64_t>(fi);
  f.close();
  // First non-finite row over all ranks.
  int64_t bad = std::numeric_limits<int64_t>::max();
  for (int64_t t = 0; t < int64_t(b.x.size()); ++t)
    if (!std::isfinite(b.x[t])) {
      bad = b.rows.begin + t / b.F;
      break;
    }
  bad = comm.allreduce_min(bad);
  if (bad != std::numeric_limits<int64_t>::max())
    // Every rank knows (allreduce): all throw, the runner prints the line once.
    throw CollectiveError(cat(path, ": ", fx, " row ", bad, " (sample_id ", b.sample_id[bad],
                              ") contains NaN or Inf"));
  return b;
}

namespace {

using Groups = std::map<int32_t, std::vector<int64_t>>;

// Groups of points embedded together: all, or one per class (sorted by label); each must
// have enough points for the perplexity.
Groups make_groups(const EmbedOptions& e, const FeatureBlock& in, const std::string& input) {
  Groups groups;
  if (e.per_class && e.method == "tsne") {
    for (int64_t i = 0; i < in.N; ++i) groups[in.labels[i]].push_back(i);
  } else {
    auto& all = groups[0];
    all.resize(static_cast<size_t>(in.N));
    for (int64_t i = 0; i < in.N; ++i) all[i] = i;
  }
  if (e.method == "tsne")
    for (const auto& [label, idx] : groups)
      if (double(idx.size()) - 1.0 < 3.0 * e.opt.perplexity)
        throw Error(
            cat(input, ": perplexity ", e.opt.perplexity,
                " needs N-1 >= 3 x perplexity, i.e. at least ",
                int64_t(std::ceil(3.0 * e.opt.perplexity)) + 1, " points",
                e.per_class ? cat(" per class; class ", label, " has ") : std::string("; found "),
                idx.size(), " (lower embed.tsne.perplexity)"));
  return groups;
}

// The PCA projection and where each group is embedded.
struct Placement {
  PcaModel pca;
  std::vector<float> local;  // [in.rows.size(), k] this rank's projected rows
  bool class_parallel = false;
  std::vector<int> owner;     // rank embedding group g (-1: all ranks together)
  std::vector<float> Xp;      // the projected rows this rank embeds
  std::vector<int64_t> slot;  // slot[row]: where a global row sits in Xp (-1: not here)
};

// PCA: a distributed fit and a local projection (in.x is released after it).
void project(const Comm& comm, const EmbedOptions& e, FeatureBlock& in, const std::string& input,
             Placement& p) {
  p.pca = pca_fit(comm, in.x.data(), in.rows.size(), in.F, e.pca_components, e.whiten);
  const int64_t k = p.pca.components;
  SIEVE_CHECK(e.method != "pca" || k >= e.opt.dims, input, ": embed.method=pca needs at least ",
              e.opt.dims, " features, found ", in.F);
  p.local.resize(size_t(in.rows.size() * k));
  pca_transform(p.pca, in.x.data(), in.rows.size(), p.local.data());
  std::vector<float>().swap(in.x);
}

// Who embeds what. Per-class runs with at least as many classes as ranks are spread over
// the ranks whole (largest class first, to the least-loaded rank), each embedded on its rank
// alone: no per-iteration allgather, and the result of a class does not depend on the rank
// count. Otherwise each group is embedded by all ranks together (rows split across them).
// The projected rows each rank needs: with classes spread over the ranks, only its own
// classes' rows (sent by alltoallv: per-rank memory shrinks as ranks are added); with a
// group embedded by all ranks together, every row (allgather).
void distribute(const Comm& comm, const Groups& groups, const FeatureBlock& in, Placement& p) {
  const int64_t N = in.N, k = p.pca.components;
  const int G = int(groups.size());
  p.class_parallel = G > 1 && comm.size() > 1 && G >= comm.size();
  p.owner.assign(static_cast<size_t>(G), -1);
  if (p.class_parallel) {
    std::vector<int64_t> size_of;
    for (const auto& [label, idx] : groups) size_of.push_back(int64_t(idx.size()));
    const std::vector<std::vector<int>> dealt = deal_largest_first(size_of, comm.size());
    for (int r = 0; r < comm.size(); ++r)
      for (int g : dealt[size_t(r)]) p.owner[size_t(g)] = r;
  }
  p.slot.assign(static_cast<size_t>(N), -1);
  if (!p.class_parallel) {
    p.Xp = comm.allgatherv(p.local);  // [N,k] on every rank
    for (int64_t r = 0; r < N; ++r) p.slot[size_t(r)] = r;
    return;
  }
  std::vector<int> group_of(static_cast<size_t>(N), -1);
  {
    int gi = 0;
    for (const auto& [label, idx] : groups) {
      for (int64_t r : idx) group_of[size_t(r)] = gi;
      ++gi;
    }
  }
  std::vector<int> counts(size_t(comm.size()), 0);
  std::vector<std::vector<float>> to(size_t(comm.size()));
  for (int64_t i = 0; i < in.rows.size(); ++i) {  // ascending rows, so each rank gets its
    const int dest = p.owner[size_t(group_of[size_t(in.rows.begin + i)])];  // rows in order
    to[size_t(dest)].insert(to[size_t(dest)].end(), p.local.begin() + i * k,
                            p.local.begin() + (i + 1) * k);
    counts[size_t(dest)] += int(k);
  }
  std::vector<float> send;
  for (auto& v : to) send.insert(send.end(), v.begin(), v.end()), std::vector<float>().swap(v);
  p.Xp = comm.alltoallv(send, counts);
  int64_t at = 0;
  for (int64_t r = 0; r < N; ++r)
    if (p.owner[size_t(group_of[size_t(r)])] == comm.rank()) p.slot[size_t(r)] = at++;
  SIEVE_ASSERT(at * k == int64_t(p.Xp.size()), "alltoallv delivered ", p.Xp.size(), " values for ",
               at, " rows");
}

// The embedding of every row and, per group, its figures.
struct Embedded {
  std::vector<double> Y;  // [N, d], row order
  // Per group: KL, 10-NN preservation, trustworthiness, its points, seconds.
  static constexpr int kStats = 5;
  std::vector<double> stats;
  std::string repulsion = "none", knn = "none";  // the methods used (the last group's)
};

Embedded embed_groups(const Comm& comm, EmbedOptions& e, const Groups& groups, const Placement& p,
                      int64_t N) {
  const int64_t k = p.pca.components;
  const int d = e.opt.dims;
  const int G = int(groups.size());
  const Comm self = Comm::self();
  Embedded out;
  out.Y.assign(size_t(N * d), 0.0);
  out.stats.assign(static_cast<size_t>(G * Embedded::kStats), 0.0);
  TsneOptions& opt = e.opt;
  int g = -1;
  for (const auto& [label, idx] : groups) {
    ++g;
    const bool mine = p.owner[g] < 0 || p.owner[g] == comm.rank();
    const int64_t n = int64_t(idx.size());
    if (e.method == "tsne") {  // chosen on every rank: rank 0 records the last one used
      opt.repulsion = e.repulsion == "auto" ? (d == 2 && n >= 2000 ? RepulsionMethod::Fft
                                                                   : RepulsionMethod::BarnesHut)
                                            : parse_repulsion(e.repulsion);
      out.repulsion = repulsion_name(opt.repulsion);
      out.knn = knn_method_name(resolve_knn_method(opt.knn, n));
    }
    if (!mine) continue;
    const Comm& gcomm = p.owner[g] < 0 ? comm : self;
    // rows[t]: the input row embedded t-th. In k-means cell order for large groups (the
    // attractive loop's gathers stay in cache, knn_approx.hpp); the output keeps row order.
    std::vector<int64_t> rows = idx;
    std::vector<float> Xg(size_t(n * k));
    auto gather = [&] {
      for (int64_t t = 0; t < n; ++t)
        std::copy(p.Xp.begin() + p.slot[rows[t]] * k, p.Xp.begin() + (p.slot[rows[t]] + 1) * k,
                  Xg.begin() + t * k);
    };
    gather();
    if (e.method == "tsne" &&
        (e.locality == "on" || (e.locality == "auto" && n >= kLocalityOrderMinPoints))) {
      const std::vector<int64_t> order = locality_order(Xg.data(), n, k);
      for (int64_t t = 0; t < n; ++t) rows[t] = idx[order[t]];
      gather();
    }
    std::vector<double> Yg(size_t(n * d));
    TsneResult tr;
    if (e.method == "tsne") {
      opt.label = G > 1 ? cat("t-SNE class ", label) : std::string("t-SNE");
      tr = tsne(gcomm, Xg.data(), n, k, opt);
      Yg = tr.Y;
      log::infof(opt.label, ": ", n, " points, ", out.repulsion, " repulsion, KL ", tr.kl, " in ",
                 log::format_duration(tr.seconds), " (k-NN + P ",
                 log::format_duration(tr.seconds_affinity), " of which k-NN ",
                 knn_method_name(tr.knn_used), " ", log::format_duration(tr.seconds_knn),
                 ", attraction ", log::format_duration(tr.seconds_attract), ", repulsion ",
                 log::format_duration(tr.seconds_repulse), ", update ",
                 log::format_duration(tr.seconds_update), ")");
    } else {
      for (int64_t t = 0; t < n; ++t)
        for (int c = 0; c < d; ++c) Yg[t * d + c] = Xg[t * k + c];
    }
    int64_t mt = std::max<int64_t>(1, e.max_trust * n / N);
    Quality q = embedding_quality(gcomm, Xg.data(), n, k, Yg.data(), d, mt, 10,
                                  e.method == "tsne" ? &tr.knn : nullptr, tr.knn_k);
    // A group embedded by all ranks ends with the same Y and figures on every rank.
    double* st = out.stats.data() + g * Embedded::kStats;
    st[0] = tr.kl;
    st[1] = q.knn_preservation;
    st[2] = q.trustworthiness;
    st[3] = double(q.trust_points);
    st[4] = tr.seconds;
    for (int64_t t = 0; t < n; ++t)
      for (int c = 0; c < d; ++c) out.Y[rows[t] * d + c] = Yg[t * d + c];
  }
  if (p.class_parallel) {
    // Each entry of Y and stats was written by its class's rank only (zeros elsewhere):
    // the sums assemble them exactly.
    comm.allreduce_sum(out.Y.data(), out.Y.size());
    comm.allreduce_sum(out.stats.data(), out.stats.size());
  }
  return out;
}

// The whole embedding's figures: the groups' KL, 10-NN preservation and trustworthiness
// weighted by their points.
struct Figures {
  double kl = 0.0, preservation = 0.0, trust = 0.0;
  int64_t trust_points = 0;
};

Figures summarise(const EmbedOptions& e, const Groups& groups, const Placement& p,
                  const Embedded& em, int64_t N) {
  Figures fig;
  double kl_weighted = 0.0;
  int g = -1;
  for (const auto& [label, idx] : groups) {
    ++g;
    const double n = double(idx.size());
    const double* st = em.stats.data() + g * Embedded::kStats;
    kl_weighted += st[0] * n;
    fig.preservation += st[1] * n;
    fig.trust += st[2] * n;
    fig.trust_points += int64_t(st[3]);
    if (p.class_parallel && p.owner[g] != 0)  // rank 0 printed its own classes as they ended
      log::infof("t-SNE class ", label, ": ", int64_t(n), " points on rank ", p.owner[g], ", KL ",
                 st[0], " in ", log::format_duration(st[4]));
  }
  fig.preservation /= double(N);
  fig.trust /= double(N);
  fig.kl = e.method == "tsne" ? kl_weighted / double(N) : std::nan("");
  // With hnsw or ivf the input-space lists are the approximate ones the affinities used (an
  // exact search is what they avoid); their recall is in docs/embed.md.
  log::infof("quality: 10-NN preservation ", fig.preservation,
             em.knn == "hnsw" || em.knn == "ivf" ? cat(" (input neighbours from ", em.knn, ")")
                                                 : std::string(),
             ", trustworthiness ", fig.trust, " (", fig.trust_points, " of ", N, " points)");
  return fig;
}

// Written by all ranks together (parallel HDF5): each writes its block of rows, so no rank
// ever holds the whole [N, k] projection.
void write_embedding(const Comm& comm, const Config& cfg, const EmbedOptions& e,
                     const FeatureBlock& in, const Placement& p, const Embedded& em,
                     const Figures& fig, const std::string& input, const std::string& output,
                     bool overwrite) {
  const TsneOptions& opt = e.opt;
  const int64_t N = in.N, k = p.pca.components;
  const int d = opt.dims;
  std::string params = e.method == "tsne"
                           ? cat("pca_components=", k, " whiten=", p.pca.whiten, " dims=", d,
                                 " perplexity=", opt.perplexity, " iterations=", opt.iterations,
                                 " early_exaggeration=", opt.exaggeration,
                                 " exaggeration_iterations=", opt.exaggeration_iterations,
                                 " learning_rate=", opt.learning_rate, " repulsion=", em.repulsion,
                                 " knn=", em.knn, " locality_order=", e.locality,
                                 " theta=", opt.theta, " init=", opt.pca_init ? "pca" : "random",
                                 " per_class=", e.per_class, " ranks=", comm.size())
                           : cat("pca_components=", k, " whiten=", p.pca.whiten, " dims=", d);
  AtomicOutput out(output, overwrite, comm, false, schema::kEmbedding, {input});
  auto agreed = [&](auto&& step) { agreed_step(comm, step); };
  h5::File f = h5::File::create(out.tmp_path(), &comm);
  const hsize_t r0 = hsize_t(in.rows.begin), rn = hsize_t(in.rows.size());
  std::vector<float> Yf(em.Y.begin() + in.rows.begin * d, em.Y.begin() + in.rows.end * d);
  agreed([&] {
    f.create_dataset<float>("/embedding", {hsize_t(N), hsize_t(d)});
    f.create_dataset<float>("/pca", {hsize_t(N), hsize_t(k)});
    f.create_dataset<int32_t>("/labels", {hsize_t(N)});
    f.create_dataset<int64_t>("/sample_id", {hsize_t(N)});
  });
  agreed([&] { f.write_rows<float>("/embedding", r0, rn, Yf.data()); });
  agreed([&] { f.write_rows<float>("/pca", r0, rn, p.local.data()); });
  agreed([&] { f.write_rows<int32_t>("/labels", r0, rn, in.labels.data() + in.rows.begin); });
  agreed([&] { f.write_rows<int64_t>("/sample_id", r0, rn, in.sample_id.data() + in.rows.begin); });
  agreed([&] {
    f.set_attr("/", "method", e.method);
    f.set_attr("/", "parameters", params);
    f.set_attr("/", "perplexity", opt.perplexity);
    f.set_attr("/", "iterations", int64_t(e.method == "tsne" ? opt.iterations : 0));
    f.set_attr("/", "per_class", int64_t(e.per_class));
    f.set_attr("/", "kl_divergence", fig.kl);
    f.set_attr("/", "knn_preservation", fig.preservation);
    f.set_attr("/", "trustworthiness", fig.trust);
    f.set_attr("/", "trustworthiness_points", fig.trust_points);
    f.set_attr("/", "trustworthiness_note",
               cat("trustworthiness (k=10) averaged over ", fig.trust_points, " of ", N,
                   fig.trust_points < N ? " points (evenly spaced subsample)" : " points (all)"));
    f.set_attr("/", "pca_explained_variance", p.pca.explained_ratio);
    f.set_attr("/", "input", input);
    h5::stamp(f, schema::kEmbedding, cfg.to_yaml());
    lineage::stamp_derived(f, schema::kEmbedding, cfg.to_yaml(), lineage::lineage_of(input));
  });
  agreed([&] { f.close(); });
  if (comm.is_root()) write_resolved_config(config_sidecar_path(output), cfg.to_yaml());
  out.commit();
}

}  // namespace

// The stage as named phases: settings, read, groups, PCA, distribute, embed, figures, write.
void reduce_dims(const Comm& comm, const Config& cfg, const std::string& input,
                 const std::string& output, bool overwrite) {
  auto t_start = std::chrono::steady_clock::now();
  check_output_path(output, overwrite, schema::kEmbedding, {input});
  check_resolved_config_path(config_sidecar_path(output));
  EmbedOptions e = embed_options(cfg);
  FeatureBlock in = read_features(comm, input);
  const Groups groups = make_groups(e, in, input);

  auto t_pca = std::chrono::steady_clock::now();
  Placement p;
  project(comm, e, in, input, p);
  distribute(comm, groups, in, p);
  double ev = 0.0;
  for (double r : p.pca.explained_ratio) ev += r;
  log::infof("PCA: ", in.N, " x ", in.F, " -> ", p.pca.components, " components (", 100.0 * ev,
             "% of the variance) in ", log::format_duration(seconds_since(t_pca)));

  const Embedded em = embed_groups(comm, e, groups, p, in.N);
  const Figures fig = summarise(e, groups, p, em, in.N);
  write_embedding(comm, cfg, e, in, p, em, fig, input, output, overwrite);
  log::infof("wrote ", output, " in ", log::format_duration(seconds_since(t_start)));
}

}  // namespace sieve::embed
