// shard_dataset: convert CIFAR-10/100, MNIST IDX or CSV data, or generate the synthetic
// dataset, into the Sieve dataset file (docs/formats.md, docs/data.md), with all ranks
// writing in parallel.
#include <cstdlib>

#include "data/shard.hpp"
#include "pipeline/schema.hpp"
#include "run/tool.hpp"

int main(int argc, char** argv) {
  // Each rank runs a producer thread (with OpenMP) beside the main thread that sits in
  // collective MPI-IO writes: let MPI yield the core while it polls, or its busy-waiting
  // starves the producers (2.5-4x slower with 2 ranks on 2 cores). A user's own setting wins.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  sieve::ToolSpec spec{
      "shard_dataset",
      "convert or generate a dataset into Sieve's HDF5 dataset file (parallel HDF5, optional "
      "shards)",
      "  shard_dataset --config configs/quickstart.yaml\n"
      "  mpirun -n 4 shard_dataset --set data.source=cifar10 --input data/cifar-10-batches-bin "
      "--output data/cifar10.h5\n"
      "  shard_dataset --set data.source=csv --set data.csv.label_column=species "
      "--input iris.csv -o iris.h5\n"
      "  shard_dataset --set data.shards=4 --set data.synthetic.train_per_class=5000 -o "
      "synth.h5\n"};
  return sieve::run_tool(argc, argv, spec, sieve::pipeline_schema(), sieve::data::add_shard_flags,
                         sieve::data::run_shard_dataset);
}
