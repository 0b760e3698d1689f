#include "embed/options.hpp"

#include "config/seeds.hpp"
#include "embed/knn_approx.hpp"
#include "util/error.hpp"

namespace sieve {

namespace embed {

EmbedOptions embed_options(const Config& cfg) {
  EmbedOptions e;
  e.method = cfg.get_string("embed.method");
  e.per_class = cfg.get_bool("embed.tsne.per_class");
  TsneOptions& opt = e.opt;
  opt.dims = int(cfg.get_int("embed.tsne.dims"));
  opt.perplexity = cfg.get_float("embed.tsne.perplexity");
  opt.iterations = int(cfg.get_int("embed.tsne.iterations"));
  opt.exaggeration = cfg.get_float("embed.tsne.early_exaggeration");
  opt.exaggeration_iterations = int(cfg.get_int("embed.tsne.exaggeration_iterations"));
  opt.learning_rate = cfg.get_float("embed.tsne.learning_rate");
  opt.momentum = cfg.get_float("embed.tsne.momentum");
  opt.final_momentum = cfg.get_float("embed.tsne.final_momentum");
  opt.max_step_norm = cfg.get_float("embed.tsne.max_step_norm");
  opt.theta = cfg.get_float("embed.tsne.theta");
  opt.pca_init = cfg.get_string("embed.tsne.init") == "pca";
  opt.seed = derived_seed(cfg, SeedFor::embedding);
  opt.progress_every = int(cfg.get_int("embed.tsne.progress_every"));
  opt.knn = parse_knn_method(cfg.get_string("embed.tsne.knn"));
  e.locality = cfg.get_string("embed.tsne.locality_order");
  e.repulsion = cfg.get_string("embed.tsne.repulsion");
  if (e.repulsion == "fft" && opt.dims != 2)
    throw UsageError("embed.tsne.repulsion=fft needs embed.tsne.dims=2 (use barnes_hut for 3-D)");
  e.pca_components = cfg.get_int("embed.pca.components");
  e.whiten = cfg.get_bool("embed.pca.whiten");
  e.max_trust = cfg.get_int("embed.quality.trustworthiness_points");
  return e;
}

}  // namespace embed
}  // namespace sieve
