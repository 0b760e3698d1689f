#include "cluster/keys.hpp"

namespace sieve {

void add_filter_keys(ConfigSchema& s) {
  // consensus by default: the best mean F1 and the best worst case (symmetric and pairwise) of
  // every detector over the kinds of noise measured; not the best on each (dbscan and knn lead
  // at symmetric 20 %; instance-dependent noise defeats all): docs/detection.md's table.
  s.add_string(
      "filter.method", "consensus",
      "noise detector whose decision makes /keep: knn (label vote of the nearest "
      "neighbours in feature space), confident (confident learning on class "
      "probabilities), posterior (the posterior of a wrong label under the confident joint's "
      "label transition), knn_posterior (the same with the nearest neighbours' labels in place "
      "of the probabilities), dynamics (area under the margin over pretrain's epochs), dbscan "
      "(the paper's: DBSCAN per class on the embedding), gmm or kmeans; consensus (rank "
      "average of knn_posterior, posterior and dynamics, flagging as many as the confident "
      "joint estimates wrong, the highest-ranked over all classes) (docs/detection.md; the "
      "names are cluster/detectors.cpp's registry, which a test holds equal to this list)",
      {"consensus", "knn", "confident", "posterior", "knn_posterior", "dynamics", "dbscan", "gmm",
       "kmeans"});
  // 0.5: a detector that calls most of a class noise is misconfigured (DBSCAN's eps 0.5 on a
  // t-SNE map spanning +-50 flagged 93-99 %), and the filtered arm would train on the rest.
  s.add_float("filter.max_flagged", 0.5,
              "largest share of any class a detector may flag; the chosen detector beyond it is "
              "an error (instead of an emptied filtered arm)",
              0.0, 1.0);
  s.add_float("filter.noise_rate", 0.0,
              "the share of wrong labels, where it is known (e.g. from relabelling a random "
              "sample): the consensus and dynamics detectors then flag that share of the "
              "training set, the highest-scored over all classes (none past "
              "filter.max_flagged unless its share of the rate is); 0: estimated "
              "from the data, which under-counts noise that "
              "follows the model's own confusions (instance-dependent; docs/detection.md)",
              0.0, 1.0);
  // On by default: where the model's errors are as many as the wrong labels, the confident
  // joint and the knn vote count its mistakes on hard clean images too (1.6-2.0x the truth at
  // 5 % on a 12 k Fashion-MNIST subset); docs/detection.md has the 113 stored runs and the ten
  // fresh ones it was checked on.
  s.add_bool("filter.test_bound", true,
             "cap the number the consensus and dynamics detectors flag where the early model's "
             "confusion on the test split (its labels taken as clean) plainly puts fewer labels "
             "wrong: at that estimate plus two standard errors (cluster/confusion_count.hpp), "
             "and a class whose count would pass filter.max_flagged at its own label's "
             "estimate plus two of its standard errors where that is under the limit; where "
             "the estimate is precise (two standard errors within a fifth of it), the "
             "posteriors' label transition from it; false where the test labels are no cleaner "
             "than the training ones");
  // Why on by default: on every stored Fashion-MNIST run with instance-dependent noise at 10,
  // 20 and 40 % (60 k, 12 k and a long tail) the test split's count was plainly below zero and
  // its magnitude 0.66-1.04x the wrong labels, where the joint's count was 0.14-0.30x;
  // docs/detection.md (thirty-first session) has the runs and the one simulation where it came
  // to 1.43x.
  s.add_bool("filter.follows_model_count", true,
             "where the test split's count is plainly below zero (the held-out samples agree "
             "with their labels more often than the test samples with theirs: the wrong labels "
             "follow the model's own confusions, or the test split is harder), flag as many as "
             "it is below zero, its magnitude, where that is more than the confident joint and "
             "the knn vote count (no class past filter.max_flagged by the raise); false: keep "
             "their count, which misses most such labels");
  s.add_bool("filter.compare", true,
             "where the dataset has /train/noise_truth, also run the other detectors (dbscan, "
             "knn, confident) and score each against it (precision, recall, F1, PR curve)");
  s.add_int("filter.knn.k", 10, "knn: neighbours that vote (the sample itself excluded)", 1, 1000);
  // 0.7 (at least 8 of 10 neighbours disagree), not a simple majority: in real data clean
  // samples of confusable classes (shirt / T-shirt) often have half their neighbours in
  // the other class; docs/detection.md has the F1 of 0.5-0.8 on three data sets.
  s.add_float("filter.knn.threshold", 0.7,
              "knn: flag a sample when more than this fraction of its neighbours carry another "
              "label",
              0.0, 1.0);
  s.add_bool("filter.per_class", true, "cluster each class on its own (false: all points at once)");
  s.add_string("filter.input_dataset", "/embedding",
               "float [N,d] dataset of the input file to cluster (e.g. /train/features of a "
               "features file); labels and sample_id are read from the same group");
  s.add_string("filter.parallel", "auto",
               "DBSCAN over MPI ranks: whole classes per rank, each class split spatially "
               "(halo exchange), or auto (classes when there are at least as many as ranks)",
               {"auto", "classes", "spatial"});
  s.add_float("filter.dbscan.eps", 0.5, "DBSCAN neighbourhood radius (> 0)");
  s.add_int("filter.dbscan.min_samples", 5,
            "DBSCAN: neighbours (the point itself included) that make a core point", 1);
  // On by default: a fixed eps means nothing on a t-SNE map whose scale depends on N and
  // perplexity (eps 0.5 on a map spanning +-50 called 93-99 % of the samples noise).
  s.add_bool("filter.dbscan.auto_eps", true,
             "choose eps at the elbow of the sorted k-distances (k = min_samples); false: use "
             "filter.dbscan.eps");
  s.add_int("filter.dbscan.auto_eps_samples", 5000,
            "auto eps: points sampled for the k-distance curve", 10);
  s.add_float("filter.outlier_quantile", 0.05,
              "gmm/kmeans: fraction of each class flagged as noise (lowest density / farthest "
              "from the centroid)",
              0.0, 1.0);
  s.add_int("filter.gmm.components", 3, "GMM: mixture components per class", 1, 1000);
  s.add_int("filter.gmm.n_init", 3, "GMM: initialisations (k-means++ seeded); the best is kept", 1,
            100);
  s.add_int("filter.gmm.max_iter", 200, "GMM: EM iterations at most", 1);
  s.add_float("filter.gmm.tol", 1e-4, "GMM: stop when the mean log-likelihood gains less", 0.0);
  s.add_float("filter.gmm.reg_covar", 1e-6, "GMM: added to covariance diagonals", 0.0);
  s.add_bool("filter.gmm.use_threshold", false,
             "GMM: flag log-density below filter.gmm.threshold instead of the quantile");
  s.add_float("filter.gmm.threshold", 0.0, "GMM: log-density threshold (with use_threshold)");
  s.add_int("filter.kmeans.k", 8, "k-means: centroids per class", 1, 100000);
  s.add_int("filter.kmeans.n_init", 3, "k-means: k-means++ restarts; the lowest inertia is kept", 1,
            100);
  s.add_int("filter.kmeans.max_iter", 300, "k-means: Lloyd iterations at most", 1);
}

}  // namespace sieve
