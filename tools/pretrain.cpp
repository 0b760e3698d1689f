// pretrain: data-parallel training of the feature extractor (docs/training.md).
#include "pipeline/schema.hpp"
#include "train/programs.hpp"

int main(int argc, char** argv) {
  sieve::ToolSpec spec{
      "pretrain", "train the feature extractor (ResNet/MLP) data-parallel; writes the model",
      "  pretrain --config configs/quickstart.yaml\n"
      "  mpirun -n 4 pretrain --config c.yaml --set pretrain.global_batch=512 --resume\n"
      "  pretrain --config c.yaml --set pretrain.folds=4 --skip-folds   # the main model, then\n"
      "  pretrain --config c.yaml --set pretrain.folds=4 --fold 2       # one fold model each\n"};
  spec.trace = true;
  return sieve::run_tool(argc, argv, spec, sieve::pipeline_schema(),
                         sieve::train::add_pretrain_flags, sieve::train::pretrain_main);
}
