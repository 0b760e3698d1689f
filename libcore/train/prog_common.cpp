// What pretrain and train_scaled share: the checkpoint-directory policy, output-directory
// checks and the all-rows index list.
#include "train/prog_common.hpp"

#include <filesystem>
#include <string>

#include "io/cleanup.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace sieve::train {

// Checkpoint directory policy: --resume continues from it; --overwrite starts over (old
// checkpoints removed); otherwise existing checkpoints are an error rather than silently
// mixed with a new run's.
void prepare_checkpoint_dir(const ToolContext& ctx, const std::string& dir, bool resume,
                            bool discard) {
  std::string err;
  if (ctx.comm.is_root()) {
    std::error_code ec;
    cleanup::make_dirs(dir, ec);
    if (ec) err = cat(dir, ": cannot create checkpoint directory: ", ec.message());
    bool any = false;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().filename().string().rfind("ckpt-", 0) == 0) any = true;
    if (err.empty() && any && !resume) {
      if (ctx.overwrite || discard) {
        for (const auto& e : fs::directory_iterator(dir, ec))
          if (e.path().filename().string().rfind("ckpt-", 0) == 0) fs::remove(e.path(), ec);
      } else {
        err = cat(dir,
                  ": holds checkpoints of an earlier run (pass --resume to continue it or "
                  "--overwrite to start over)");
      }
    }
  }
  ctx.comm.bcast_string(err);
  if (!err.empty()) throw UsageError(err);
}

// Creates a stage's own output directory (`levels` = how many trailing components are the
// stage's: pretrain/ is 1, sweep/run-N/ is 2) but never the directories above it, so that a
// mistyped run.dir or --output is an error naming it instead of a new, empty tree.
void make_output_dir(const ToolContext& ctx, const fs::path& dir, int levels) {
  std::string err;
  if (ctx.comm.is_root()) {
    fs::path base = dir;
    for (int i = 0; i < levels; ++i) base = base.parent_path();
    if (base.empty()) base = ".";
    std::error_code ec;
    if (!fs::is_directory(base)) {
      err = cat(dir.string(), ": cannot create the output directory: ", base.string(),
                " does not exist");
    } else if (!cleanup::make_dirs(dir.string(), ec)) {
      err = cat(dir.string(), ": cannot create the output directory: ",
                ec ? ec.message() : std::string("a file of that name exists"));
    }
  }
  ctx.comm.bcast_string(err);
  if (!err.empty()) throw CollectiveError(err);
}

std::vector<int64_t> all_indices(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = i;
  return v;
}

}  // namespace sieve::train
