#include "cluster/options.hpp"

#include "util/error.hpp"

namespace sieve {

namespace cluster {

FilterOptions filter_options(const Config& cfg) {
  FilterOptions o;
  o.method = cfg.get_string("filter.method");
  o.per_class = cfg.get_bool("filter.per_class");
  o.parallel = cfg.get_string("filter.parallel");
  o.dbscan.eps = cfg.get_float("filter.dbscan.eps");
  o.dbscan.min_samples = cfg.get_int("filter.dbscan.min_samples");
  o.auto_eps = cfg.get_bool("filter.dbscan.auto_eps");
  o.auto_eps_samples = cfg.get_int("filter.dbscan.auto_eps_samples");
  o.gmm.k = int(cfg.get_int("filter.gmm.components"));
  o.gmm.n_init = int(cfg.get_int("filter.gmm.n_init"));
  o.gmm.max_iter = int(cfg.get_int("filter.gmm.max_iter"));
  o.gmm.tol = cfg.get_float("filter.gmm.tol");
  o.gmm.reg_covar = cfg.get_float("filter.gmm.reg_covar");
  o.gmm_use_threshold = cfg.get_bool("filter.gmm.use_threshold");
  o.gmm_threshold = cfg.get_float("filter.gmm.threshold");
  o.kmeans.k = int(cfg.get_int("filter.kmeans.k"));
  o.kmeans.n_init = int(cfg.get_int("filter.kmeans.n_init"));
  o.kmeans.max_iter = int(cfg.get_int("filter.kmeans.max_iter"));
  o.outlier_quantile = cfg.get_float("filter.outlier_quantile");
  o.seed = uint64_t(cfg.get_int("run.seed"));
  o.gmm.seed = o.kmeans.seed = o.seed;
  if (o.method == "dbscan" && !o.auto_eps && !(o.dbscan.eps > 0))
    throw UsageError(cat("config key 'filter.dbscan.eps': expected a value > 0, got ", o.dbscan.eps,
                         " (or set filter.dbscan.auto_eps=true)"));
  if (o.dbscan.min_samples < 1)
    throw UsageError(
        cat("config key 'filter.dbscan.min_samples': expected >= 1, got ", o.dbscan.min_samples));
  return o;
}

}  // namespace cluster
}  // namespace sieve
