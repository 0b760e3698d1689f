// pretrain.loss auto: train with the cross-entropy; where that run memorised its labels
// (EarlyModelKeeper::run_memorised, the test pretrain.early_pick uses), train again with the
// generalized cross-entropy (gce) and keep the second run's models.
//
// Why: whether gce helps the detectors is only known after a cross-entropy run. Measured over
// 23 cells of five data sets and four kinds of noise (docs/detection.md, thirteenth and
// fourteenth sessions): where the cross-entropy run memorised, gce's early model found more
// of the wrong labels in 14 of 15 (F1 -0.01 to +0.22); where it did not (the quickstart,
// Fashion-MNIST 60 k symmetric), gce lost. The second run costs one more pretraining, only
// where it fires. Since the seventeenth session the test also asks that the gap opened after
// the held-out accuracy stopped rising (train/crossfit.hpp), so clean Fashion-MNIST (where gce
// removed 5.8 % of a clean 12 k set, 1.0 % with the cross-entropy) and its instance noise
// (where gce's ranking was worse) keep the cross-entropy run.
//
// Files: the second run's checkpoints in <checkpoints>/second_pass/, beside first_pass.json
// ({"run_id", "first_pass": the first run's verdict}), written before the second run starts:
// a resumed run that finds it (of its own run) goes on with the second run and does not
// train the first again. The first run's metrics stay in the output set as
// metrics_first_pass.jsonl; its models are replaced by the second run's; model_early.json
// carries the verdict as "first_pass" (the report says what happened).
#pragma once
#include <string>

#include "comm/comm.hpp"
#include "io/metrics.hpp"

namespace sieve::train {

inline constexpr const char* kFirstPassMetrics = "metrics_first_pass.jsonl";

// <ckpt_dir>/second_pass
std::string second_pass_dir(const std::string& ckpt_dir);
// Collective: the first run's verdict recorded in `dir` by run `run_id`; null when there is
// none or it is another run's.
Json read_first_pass(const Comm& comm, const std::string& dir, const std::string& run_id);
// Collective (rank 0 writes): records the verdict in `dir`.
void write_first_pass(const Comm& comm, const std::string& dir, const std::string& run_id,
                      const Json& verdict);
// Collective: the loss a finished pretrain's main model was trained with, from its early
// model's record `info` (model_early.json; "loss"): what fold tasks (pretrain --fold k) of an
// auto run train with. cross_entropy where there is no record (pretrain.holdout 0: auto does
// not fire without a held-out curve).
std::string decided_loss(const Comm& comm, const std::string& info);

}  // namespace sieve::train
