#include "config/tool.hpp"

#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "config/key_path.hpp"
#include "config/sections.hpp"
#include "util/log.hpp"
#include "util/threads.hpp"

namespace sieve {

std::string ToolContext::flag(const std::string& name) const {
  if (!flags.count(name)) return "";
  return flags[name].as<std::string>();
}

namespace {

// OpenMPI refuses to run as root unless told it may; the scripts set these for mpirun,
// and we set them here too so that a tool started directly (MPI singleton) works.
void allow_root_mpi() {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
}

// Several ranks on one node must share its cores: without this each rank starts one
// OpenMP (and OpenBLAS) thread per core, and the oversubscribed spin-waiting threads made
// a 2-rank run on 2 cores ~20x slower. An explicit OMP_NUM_THREADS always wins.
void share_cores(const Comm& comm) {
  if (std::getenv("OMP_NUM_THREADS")) return;
  int cores = int(std::thread::hardware_concurrency());
  int threads = std::max(1, cores / std::max(1, comm.local_size()));
  omp_set_num_threads(threads);
  set_blas_threads(threads);
}

}  // namespace

int run_tool(int argc, char** argv, const ToolSpec& spec, const FlagAdder& add_flags,
             const ToolBody& body) {
  allow_root_mpi();
  MpiSession mpi(&argc, &argv);
  Comm comm = Comm::world();
  log::set_rank(comm.rank(), comm.size());
  log::set_tool_name(spec.name);
  share_cores(comm);

  po::options_description common("Common options");
  // clang-format off
  common.add_options()
      ("help,h", "print this help and exit")
      ("help-config", "list every config key with its default, range and meaning")
      ("version", "print the version and exit")
      ("config,c", po::value<std::vector<std::string>>()->composing(),
       "YAML config file; repeat to layer files (e.g. a sweep grid over a base config)")
      ("set,s", po::value<std::vector<std::string>>()->composing(),
       "override one config key: --set key.path=value (repeatable)")
      ("overwrite", "replace existing outputs")
      ("get", po::value<std::string>(), "print the resolved value of one config key and exit");
  // clang-format on
  po::options_description own(spec.name + " options");
  if (add_flags) add_flags(own);
  po::options_description all;
  all.add(own).add(common);

  ToolContext ctx{comm, Config(), {}, false};
  try {
    po::store(po::command_line_parser(argc, argv).options(all).run(), ctx.flags);
    po::notify(ctx.flags);
  } catch (const po::error& e) {
    if (comm.is_root())
      std::fprintf(stderr, "%s: error: %s (see --help)\n", spec.name.c_str(), e.what());
    return 2;
  }
  if (ctx.flags.count("help")) {
    if (comm.is_root()) {
      std::cout << spec.name << " — " << spec.summary << "\n\nUsage: " << spec.name
                << " [options]\n\n"
                << all << "\n";
      if (!spec.examples.empty()) std::cout << "Examples:\n" << spec.examples << "\n";
      std::cout << "Exit codes: 0 success, 1 runtime error, 2 usage or config error.\n";
    }
    return 0;
  }
  if (ctx.flags.count("version")) {
    if (comm.is_root()) std::cout << spec.name << " (Sieve) " << SIEVE_VERSION << "\n";
    return 0;
  }
  if (ctx.flags.count("help-config")) {
    if (comm.is_root()) std::cout << pipeline_schema().describe();
    return 0;
  }
  try {
    std::vector<std::string> overrides;
    if (ctx.flags.count("set")) overrides = ctx.flags["set"].as<std::vector<std::string>>();
    std::vector<std::string> files;
    if (ctx.flags.count("config")) files = ctx.flags["config"].as<std::vector<std::string>>();
    ctx.cfg = Config::load(pipeline_schema(), files, overrides);
  } catch (const Error& e) {
    if (comm.is_root()) log::error(e.what());
    return e.exit_code();
  }
  ctx.overwrite = ctx.flags.count("overwrite") > 0;
  if (ctx.flags.count("get")) {
    // For scripts: the value as the programs see it (defaults + file + --set).
    std::string key = ctx.flag("get");
    try {
      YAML::Node cur = find_at_key_path(YAML::Load(ctx.cfg.to_yaml()), key);
      if (!cur) throw UsageError(cat("--get ", key, ": unknown key"));
      if (comm.is_root()) {
        if (cur.IsScalar()) {
          std::cout << cur.Scalar() << "\n";
        } else {
          YAML::Emitter e;
          e << YAML::Flow << cur;
          std::cout << e.c_str() << "\n";
        }
      }
    } catch (const Error& e) {
      if (comm.is_root()) log::error(e.what());
      return e.exit_code();
    }
    return 0;
  }

  int code = 0;
  bool collective = false;
  try {
    body(ctx);
  } catch (const UsageError& e) {
    if (comm.is_root() || comm.size() == 1) log::error(e.what());
    code = e.exit_code();
  } catch (const CollectiveError& e) {
    // Every rank has it: one line from rank 0, and no rank is left waiting in a collective.
    if (comm.is_root()) log::error(e.what());
    code = e.exit_code();
    collective = true;
  } catch (const Error& e) {
    log::error(e.what());
    code = e.exit_code();
  } catch (const std::bad_alloc&) {
    log::error("out of memory");
    code = 1;
  } catch (const std::exception& e) {
    log::error(cat("unexpected failure: ", e.what()));
    code = 1;
  }
  // One failed rank ends the job on every rank instead of leaving the others blocked
  // in a collective. (At size 1 we return normally so destructors clean up temporaries.)
  if (code != 0 && comm.size() > 1 && !collective) comm.abort(code);
  return code;
}

}  // namespace sieve
