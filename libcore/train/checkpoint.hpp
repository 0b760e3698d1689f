// Checkpoints (sieve.checkpoint/1) and final model files (sieve.model/1).
//
// Layout (docs/formats.md): /state/<torchvision name> for every parameter (with its shape)
// and buffer; /optimizer/<name> momentum for every parameter; root attrs describing the
// model (arch, width, stem, num_classes, input_shape, feature_dim, feature_layer,
// mlp_hidden, in_features, precision: the activation dtype it was trained with); group /progress with attrs epoch, step_in_epoch, step, seed
// (the RNG state: every draw in training is a pure function of seed, epoch, step and
// sample id), elapsed, and the partial-epoch train statistics; root attr `done` = 1 written
// last. Files are written by rank 0 through AtomicOutput (temp name + rename), so a file
// named ckpt-<step>.h5 is complete; `done` also guards against copies truncated elsewhere.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "comm/comm.hpp"
#include "io/lineage.hpp"
#include "nn/model.hpp"
#include "train/optimizer.hpp"

namespace sieve::train {

struct TrainState {
  int64_t epoch = 0;          // current epoch (0-based)
  int64_t step_in_epoch = 0;  // next step inside the epoch
  int64_t step = 0;           // optimizer steps done in total
  uint64_t seed = 0;
  int64_t global_batch = 0;  // samples per step; a resume must use the same
  double elapsed_s = 0;       // training time before this process
  double loss_sum = 0;        // partial epoch: sum of per-sample loss (global)
  int64_t correct = 0, seen = 0;
  std::string loader = "memory";  // SampleSource::describe(): a streamed order needs the same
};

// Write a checkpoint (collective: every rank calls; rank 0 writes).
void save_checkpoint(const std::string& path, nn::Model& model, const SgdOptimizer& opt,
                     const TrainState& st, const std::string& config_yaml, const Comm& comm);
// Restore into an already-built model and optimizer (every rank reads). Error naming the
// file for a wrong schema, an incomplete file or a mismatching parameter.
TrainState load_checkpoint(const std::string& path, nn::Model& model, SgdOptimizer& opt);

// The activation dtype a checkpoint was trained with (its `precision` attr).
nn::DType checkpoint_precision(const std::string& path);

// "dir/ckpt-000000123.h5" for step 123.
std::string checkpoint_name(const std::string& dir, int64_t step);
// Newest complete checkpoint in `dir` ("" if none). Rank-local (call on one rank + bcast).
std::string latest_checkpoint(const std::string& dir);
// Collective: rank 0's latest_checkpoint(dir), the same on every rank (ranks may see a file
// system mid-write differently; the run follows rank 0).
std::string agreed_latest_checkpoint(const Comm& comm, const std::string& dir);
// Collective: the run id (io/output_set.hpp) of that checkpoint, "" without one.
std::string agreed_checkpoint_run_id(const Comm& comm, const std::string& dir);
// Remove all but the newest `keep` checkpoints (rank-local).
void prune_checkpoints(const std::string& dir, int64_t keep);

// Final model file (sieve.model/1): /state + model attrs + lineage (`from`: the dataset it
// was trained on). Collective; rank 0 writes.
void save_model(const std::string& path, nn::Model& model, const std::string& config_yaml,
                const lineage::Lineage& from, bool overwrite, const Comm& comm);
// Rebuild the model described by a model file and load its weights, on `backend` computing in
// `dtype` (weights are fp32 in the file whatever precision trained them).
std::unique_ptr<nn::Model> load_model(const std::string& path, const std::string& backend = "cpu",
                                      nn::DType dtype = nn::DType::f32);

// Helpers shared with tests: a model's parameters as ParamSlices.
std::vector<ParamSlice> param_slices(const nn::Model& model);

}  // namespace sieve::train
