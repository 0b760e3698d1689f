#include "embed/keys.hpp"

namespace sieve {

// Keys of the 'embed' section (reduce_dims): PCA, then t-SNE on the PCA output.
void add_embed_keys(ConfigSchema& s) {
  s.add_string("embed.method", "tsne",
               "tsne: PCA then t-SNE; pca: the embedding is the first embed.tsne.dims PCA columns",
               {"tsne", "pca"});
  s.add_int("embed.pca.components", 50,
            "PCA components kept (the t-SNE input); clipped to the feature count", 1, 4096);
  s.add_bool("embed.pca.whiten", false, "scale each component to unit variance");
  s.add_int("embed.tsne.dims", 2, "embedding dimension (FFT repulsion needs 2)", 2, 3);
  s.add_float("embed.tsne.perplexity", 30.0, "perplexity; k = 3 x perplexity neighbours", 1.0,
              1000.0);
  s.add_int("embed.tsne.iterations", 750, "total gradient-descent iterations", 1, 100000);
  s.add_float("embed.tsne.early_exaggeration", 12.0, "P multiplier in the early phase", 1.0, 100.0);
  s.add_int("embed.tsne.exaggeration_iterations", 250,
            "iterations with early exaggeration (momentum switches here too)", 0, 100000);
  s.add_float("embed.tsne.learning_rate", 0.0,
              "step size; 0 = per phase, max(200, N/exaggeration)/4: N/48 while exaggerating, "
              "N/4 afterwards (openTSNE's 'auto' in this gradient's units)",
              0.0);
  s.add_float("embed.tsne.momentum", 0.5, "momentum during early exaggeration", 0.0, 1.0);
  s.add_float("embed.tsne.final_momentum", 0.8, "momentum afterwards", 0.0, 1.0);
  s.add_float("embed.tsne.max_step_norm", 5.0,
              "each point's step is clipped to this length (0: no clipping); keeps the large "
              "final learning rate from throwing points off",
              0.0);
  s.add_string("embed.tsne.repulsion", "auto",
               "repulsive forces: fft (FIt-SNE interpolation), barnes_hut, exact (O(N^2)); "
               "auto = fft for 2-D and N >= 2000, else barnes_hut",
               {"auto", "fft", "barnes_hut", "exact"});
  s.add_string("embed.tsne.knn", "auto",
               "input k-NN of the affinities (k = 3 x perplexity): exact (blocked GEMM, "
               "2 N^2 D flops), ivf (approximate: k-means cells of sqrt N rows, each searched "
               "by GEMM against its 64 nearest cells) or hnsw (approximate, hnswlib graph "
               "built on one thread: slow to build); auto = exact below 200000 points, else "
               "ivf (docs/embed.md has recall and times)",
               {"auto", "exact", "hnsw", "ivf"});
  s.add_string("embed.tsne.locality_order", "auto",
               "embed the points in a k-means cell order (each one's neighbours near in "
               "memory; the output keeps the input order): on, off; auto = on from 100000 "
               "points",
               {"auto", "on", "off"});
  s.add_string("embed.tsne.init", "pca",
               "initial positions: pca (leading PCA components) or random (seeded from run.seed); "
               "both scaled to std 1e-4",
               {"pca", "random"});
  s.add_float("embed.tsne.theta", 0.5, "Barnes-Hut opening angle", 0.0, 2.0);
  s.add_bool("embed.tsne.per_class", false,
             "run t-SNE separately for each class (else over all points together)");
  s.add_int("embed.tsne.progress_every", 50,
            "print KL, iterations/s and ETA every this many "
            "iterations",
            1);
  s.add_int("embed.quality.trustworthiness_points", 2000,
            "trustworthiness is averaged over at most this many points (a fixed subsample)", 10);
}

}  // namespace sieve
