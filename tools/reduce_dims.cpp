// reduce_dims: features -> distributed PCA -> t-SNE (2-D/3-D) -> embedding file.
// The work lives in libcore/embed (reduce.hpp); see docs/embed.md.
#include "config/sections.hpp"
#include "embed/reduce.hpp"
#include "pipeline/schema.hpp"
#include "run/tool.hpp"

int main(int argc, char** argv) {
  sieve::ToolSpec spec{
      "reduce_dims",
      "PCA (distributed) then t-SNE of a features file; writes the embedding with its "
      "quality figures (KL, 10-NN preservation, trustworthiness)",
      "  reduce_dims --config run.yaml\n"
      "  mpirun -n 4 reduce_dims --input features.h5 --output embedding.h5 "
      "--set embed.tsne.perplexity=50\n"};
  auto flags = [](sieve::po::options_description& o) {
    o.add_options()("input", sieve::po::value<std::string>(),
                    "features file (default: <run.dir>/features.h5)")(
        "output", sieve::po::value<std::string>(),
        "embedding file (default: <run.dir>/embedding.h5)");
  };
  return sieve::run_tool(argc, argv, spec, sieve::pipeline_schema(), flags,
                         [](sieve::ToolContext& ctx) {
                           auto paths = sieve::run_paths(ctx.cfg);
                           std::string in = ctx.path_flag("input", paths.features());
                           std::string out = ctx.path_flag("output", paths.embedding());
                           sieve::embed::reduce_dims(ctx.comm, ctx.cfg, in, out, ctx.overwrite);
                         });
}
