#include "run/tool.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <thread>

#include "config/key_path.hpp"
#include "io/atomic_output.hpp"
#include "io/cleanup.hpp"
#include "util/log.hpp"
#include "util/threads.hpp"
#include "util/trace.hpp"

namespace fs = std::filesystem;

namespace sieve {

std::string ToolContext::flag(const std::string& name) const {
  if (!flags.count(name)) return "";
  return flags[name].as<std::string>();
}

std::string ToolContext::path_flag(const std::string& name, const std::string& def,
                                   bool must_exist) const {
  std::string v = flag(name);
  if (v.empty()) return def;
  if (must_exist && !fs::exists(v)) throw UsageError(cat("--", name, " ", v, ": no such file"));
  return v;
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

// Directories a failed stage created and left empty (pretrain/checkpoints, sweep/run-N, a
// new run.dir) are removed, so that a failed stage leaves nothing behind: only those this
// process made itself (every directory creation goes through cleanup::make_dirs, which
// records them) and that are still empty, never one another process made meanwhile.
void remove_new_empty_dirs() {
  cleanup::remove_made_empty_dirs();
}

// How long a failed rank waits for the others to report the same failure before it ends
// the job: errors that every rank reaches arrive within moments of each other.
constexpr double kAgreeTimeoutS = 5.0;

// Non-blocking max-allreduce of the exit codes on `vc`. A rank that failed waits at most
// kAgreeTimeoutS; a rank that succeeded waits for the others (a failed one completes the
// reduction or aborts the job). Returns true when every rank took part (and then `code`
// is the largest code of any rank on all of them, so every rank exits non-zero alike).
// A failed MPI call here counts as "not every rank took part" (the job is then aborted).
bool agree_on_exit(const Comm& vc, int& code) {
  int local = code;
  // [0]: the worst code; [1]: whether any rank failed.
  int mine[2] = {local, local != 0 ? 1 : 0}, all[2] = {0, 0};
  try {
    Request req = vc.iallreduce_max(mine, all, 2);
    auto t0 = std::chrono::steady_clock::now();
    while (!req.test()) {
      if (local != 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >
              kAgreeTimeoutS) {
        req.abandon();  // the others may never join: the job is aborted next
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(local != 0 ? 1 : 5));
    }
  } catch (const Error&) {
    return false;
  }
  // Either every rank failed, or some succeeded: in both cases all reached this point, so
  // no rank is stuck; a success here and a failure there is still a failed job.
  code = std::max(local, all[0]);
  return true;
}

// The lowest rank whose own code is non-zero (the one that prints).
int first_failed_rank(const Comm& vc, int local_code) {
  try {
    return vc.allreduce_min(local_code != 0 ? vc.rank() : vc.size());
  } catch (const Error&) {
    return vc.rank();  // no agreement on who prints: this rank prints its own
  }
}

// The options every tool takes (help, config, overrides, --get ...), after the tool's own.
void add_common_options(po::options_description& all) {
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
      ("get", po::value<std::string>(), "print the resolved value of one config key and exit ('.': the whole resolved config)");
  // clang-format on
  all.add(common);
}

// The command line into ctx.flags; a usage error is printed once (rank 0) and gives code 2.
std::optional<int> parse_command_line(int argc, char** argv, const po::options_description& all,
                                      const ToolSpec& spec, ToolContext& ctx) {
  try {
    auto parsed = po::command_line_parser(argc, argv).options(all).run();
    // A bare word is never meant: most often a config file without --config, which would
    // otherwise be ignored and the defaults used.
    for (const auto& o : parsed.options)
      if (o.position_key >= 0) {
        const std::string w = o.value.empty() ? std::string() : o.value[0];
        throw po::error(cat("unexpected argument '", w, "'",
                            w.size() > 5 && (w.ends_with(".yaml") || w.ends_with(".yml"))
                                ? cat(" (did you mean --config ", w, "?)")
                                : std::string()));
      }
    po::store(parsed, ctx.flags);
    po::notify(ctx.flags);
  } catch (const po::error& e) {
    if (ctx.comm.is_root())
      std::fprintf(stderr, "%s: error: %s (see --help)\n", spec.name.c_str(), e.what());
    return 2;
  }
  return std::nullopt;
}

// --help, --version and --help-config, printed by rank 0: code 0 when one was asked for.
std::optional<int> answer_info_flags(const po::options_description& all, const ToolSpec& spec,
                                     const ConfigSchema& schema, const ToolContext& ctx) {
  const bool root = ctx.comm.is_root();
  if (ctx.flags.count("help")) {
    if (root) {
      std::cout << spec.name << " — " << spec.summary << "\n\nUsage: " << spec.name
                << " [options]\n\n"
                << all << "\n";
      if (!spec.examples.empty()) std::cout << "Examples:\n" << spec.examples << "\n";
      std::cout << "Exit codes: 0 success, 1 runtime error, 2 usage or config error.\n";
    }
    return 0;
  }
  if (ctx.flags.count("version")) {
    if (root) std::cout << spec.name << " (Sieve) " << SIEVE_VERSION << "\n";
    return 0;
  }
  if (ctx.flags.count("help-config")) {
    if (root) std::cout << schema.describe();
    return 0;
  }
  return std::nullopt;
}

// The config: the schema's defaults, the --config files in order, then each --set. An
// error is printed once and gives its code.
std::optional<int> load_config(const ConfigSchema& schema, ToolContext& ctx) {
  try {
    std::vector<std::string> overrides;
    if (ctx.flags.count("set")) overrides = ctx.flags["set"].as<std::vector<std::string>>();
    std::vector<std::string> files;
    if (ctx.flags.count("config")) files = ctx.flags["config"].as<std::vector<std::string>>();
    ctx.cfg = Config::load(schema, files, overrides);
    note_config_inputs(files);  // inputs of this run: no output may replace one
  } catch (const Error& e) {
    if (ctx.comm.is_root()) log::error(e.what(), false);
    return e.exit_code();
  }
  return std::nullopt;
}

// --get KEY, for scripts: the value as the programs see it (defaults + file + --set).
int print_config_key(const ToolContext& ctx) {
  const std::string key = ctx.flag("get");
  const bool root = ctx.comm.is_root();
  try {
    if (key == ".") {  // the whole resolved config, as block YAML (for scripts)
      if (root) std::cout << ctx.cfg.to_yaml() << std::flush;
      return 0;
    }
    YAML::Node cur = find_at_key_path(YAML::Load(ctx.cfg.to_yaml()), key);
    if (!cur) throw UsageError(cat("--get ", key, ": unknown key"));
    if (root) {
      if (cur.IsScalar()) {
        std::cout << cur.Scalar() << "\n";
      } else {
        YAML::Emitter e;
        e << YAML::Flow << cur;
        std::cout << e.c_str() << "\n";
      }
    }
  } catch (const Error& e) {
    if (root) log::error(e.what(), false);
    return e.exit_code();
  }
  return 0;
}

// The tool's body, then one verdict for the whole job: a failure every rank reached is
// printed once and every rank exits with the code; a failure of one rank alone ends the job.
int run_body(ToolContext& ctx, const ToolBody& body) {
  const Comm& comm = ctx.comm;
  // A private duplicate of the world communicator for the end-of-run agreement, so that
  // it can never be matched against a collective that another rank is still inside.
  std::optional<Comm> verdict_comm;
  if (comm.size() > 1) verdict_comm = comm.dup();
  int code = 0;
  std::string message;
  // A job across nodes logs where each rank runs: hostnames and node-local ranks are what
  // a wrong placement (two ranks on one node, a node missing) shows up in.
  if (const std::string where = describe_placement(comm); !where.empty()) log::info(where);
  if (comm.is_root())
    if (const std::string w = blas_kernel_warning(); !w.empty()) log::warn(w);
  try {
    body(ctx);
  } catch (const Error& e) {
    message = e.what();
    code = e.exit_code();
  } catch (const std::bad_alloc&) {
    message = "out of memory";
    code = 1;
  } catch (const std::exception& e) {
    message = cat("unexpected failure: ", e.what());
    code = 1;
  }
  message = name_outputs_in(message);
  if (comm.size() == 1) {
    if (code != 0) {
      log::error(message);
      remove_new_empty_dirs();
    }
    return code;
  }
  const bool all_ranks = agree_on_exit(*verdict_comm, code);
  if (code != 0) {
    // Every rank failed alike (the same bad input, output path or config seen by all):
    // one line from the lowest failed rank, and every rank exits normally with the code.
    if (all_ranks) {
      if (comm.rank() == first_failed_rank(*verdict_comm, code)) log::error(message, false);
      if (comm.is_root()) remove_new_empty_dirs();
    } else {
      // Only this rank failed; the others are blocked in a collective: end the job.
      log::error(message);
      if (comm.is_root()) remove_new_empty_dirs();
      comm.abort(code);
    }
  }
  return code;  // verdict_comm is freed here, before run_tool's MpiSession finalizes
}

}  // namespace

int run_tool(int argc, char** argv, const ToolSpec& spec, const ConfigSchema& schema,
             const FlagAdder& add_flags, const ToolBody& body) {
  allow_root_mpi();
  MpiSession mpi(&argc, &argv);
  Comm comm = Comm::world();
  log::set_rank(comm.rank(), comm.size());
  log::set_tool_name(spec.name);
  share_cores(comm);
  // SIGINT/SIGTERM/SIGHUP remove this process's temporaries, then end it as the signal
  // would (a trainer's SIGTERM checkpoint handler replaces this one while it trains).
  cleanup::install_signal_handlers();

  po::options_description own(spec.name + " options");
  if (add_flags) add_flags(own);
  if (spec.trace)
    own.add_options()("trace", po::value<std::string>(),
                      "write the training step timeline to FILE: Chrome trace-event JSON, one "
                      "process per rank (open in ui.perfetto.dev or chrome://tracing)");
  po::options_description all;
  all.add(own);
  add_common_options(all);

  ToolContext ctx{comm, Config(), {}, false};
  if (auto code = parse_command_line(argc, argv, all, spec, ctx)) return *code;
  if (auto code = answer_info_flags(all, spec, schema, ctx)) return *code;
  if (auto code = load_config(schema, ctx)) return *code;
  ctx.overwrite = ctx.flags.count("overwrite") > 0;
  if (ctx.flags.count("trace")) trace::enable(ctx.flag("trace"));
  if (ctx.flags.count("get")) return print_config_key(ctx);
  return run_body(ctx, body);
}

}  // namespace sieve
