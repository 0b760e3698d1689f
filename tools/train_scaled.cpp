// train_scaled: one run of the large-batch retraining sweep (docs/training.md).
#include "pipeline/schema.hpp"
#include "train/programs.hpp"

int main(int argc, char** argv) {
  sieve::ToolSpec spec{
      "train_scaled",
      "retrain at a sweep point (global batch, arm full/filtered/random, seed, weight decay)",
      "  train_scaled --config c.yaml --sweep-size\n"
      "  train_scaled --config c.yaml --list-sweep\n"
      "  mpirun -n 8 train_scaled --config c.yaml --sweep-index 5 --resume\n"
      "  mpirun -n 8 train_scaled --config c.yaml --sweep-index all --ranks-per-run 2\n"};
  spec.trace = true;
  return sieve::run_tool(argc, argv, spec, sieve::pipeline_schema(), sieve::train::add_scaled_flags,
                         sieve::train::train_scaled_main);
}
