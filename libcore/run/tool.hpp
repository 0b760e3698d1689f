// The shared front of every Sieve program: MPI start-up, the common flags, config
// loading, error reporting and exit codes. A tool's main() is a few lines:
//
//   int main(int argc, char** argv) {
//     return sieve::run_tool(argc, argv, spec, sieve::pipeline_schema(), add_flags,
//                            [](sieve::ToolContext& ctx) {...});
//   }
//
// Common flags: --config FILE.yaml, --set key.path=value (repeatable), --overwrite,
// --help, --help-config (every key with default, range and meaning), --version,
// --get key.path (print one resolved value, for scripts).
// Errors before the body runs (flags, config) are the same on every rank: rank 0 prints
// one line and every rank exits 2. After the body, the ranks agree on the outcome over a
// private communicator: when every rank gets there (the same error on all ranks, or an
// error on some after the last collective), the lowest failed rank prints its one line and
// every rank exits with the code, no MPI_Abort. A rank whose failure the others do not
// reach within a few seconds (they wait in a collective) prints "[rank r] ..." and ends
// the whole job (MPI_Abort), so a failed rank never leaves others hanging.
// A positional argument (a config file without --config) is a usage error.
#pragma once
#include <boost/program_options.hpp>

#include <functional>
#include <string>

#include "comm/comm.hpp"
#include "config/config.hpp"

namespace sieve {

namespace po = boost::program_options;

struct ToolSpec {
  std::string name;      // program name, e.g. "shard_dataset"
  std::string summary;   // one line: what it does
  std::string examples;  // a few example invocations for --help
  // Accepts `--trace FILE`: the training step timeline (util/trace.hpp), written by the
  // trainer (pretrain, train_scaled).
  bool trace = false;
};

struct ToolContext {
  Comm comm;
  Config cfg;
  po::variables_map flags;
  bool overwrite = false;
  // Value of a tool flag, or "" when absent.
  std::string flag(const std::string& name) const;
  // A path flag: its value, or `def` when it is absent or empty (the defaults come from
  // run_paths(cfg)). With `must_exist`, a given path that does not exist is a usage error
  // (`--NAME PATH: no such file`); a default is the caller's to check, as it may be absent.
  std::string path_flag(const std::string& name, const std::string& def,
                        bool must_exist = false) const;
  bool has_flag(const std::string& name) const { return flags.count(name) > 0; }
};

using FlagAdder = std::function<void(po::options_description&)>;
using ToolBody = std::function<void(ToolContext&)>;

// `schema`: the keys --config/--set may name and --help-config lists (the pipeline's, from
// pipeline/schema.hpp, for every Sieve program).
int run_tool(int argc, char** argv, const ToolSpec& spec, const ConfigSchema& schema,
             const FlagAdder& add_flags, const ToolBody& body);

}  // namespace sieve
