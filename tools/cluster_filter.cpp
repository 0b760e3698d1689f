// cluster_filter: flag noisy training samples with one of several detectors (k-NN label
// vote, confident learning, DBSCAN per class on the embedding, GMM, k-means), write the
// keep-mask, the matched random control, the per-class table and, where ground truth
// exists, every detector's score against it (docs/formats.md: sieve.filter/1).
#include "cluster/program.hpp"
#include "pipeline/schema.hpp"

int main(int argc, char** argv) {
  sieve::ToolSpec spec{
      "cluster_filter",
      "flag noisy samples (k-NN vote / confident learning / DBSCAN / GMM / k-means) and write "
      "keep-masks",
      "  cluster_filter --config run.yaml\n"
      "  cluster_filter --config run.yaml --set filter.method=dbscan   # the paper's detector\n"
      "  cluster_filter --input features.h5 --input-dataset /train/features "
      "--set filter.method=gmm\n"
      "  mpirun -n 4 cluster_filter --config run.yaml --set filter.dbscan.auto_eps=true\n"};
  return sieve::run_tool(argc, argv, spec, sieve::pipeline_schema(),
                         sieve::cluster::add_filter_flags, sieve::cluster::cluster_filter_main);
}
