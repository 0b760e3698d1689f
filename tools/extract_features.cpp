// extract_features: penultimate-layer features of every sample (docs/training.md).
#include "pipeline/schema.hpp"
#include "train/programs.hpp"

int main(int argc, char** argv) {
  sieve::ToolSpec spec{
      "extract_features", "run the trained model over the dataset; write penultimate features",
      "  extract_features --config configs/quickstart.yaml\n"
      "  mpirun -n 4 extract_features --model m.h5 --dataset d.h5 --output f.h5\n"};
  return sieve::run_tool(argc, argv, spec, sieve::pipeline_schema(),
                         sieve::train::add_features_flags, sieve::train::extract_features_main);
}
