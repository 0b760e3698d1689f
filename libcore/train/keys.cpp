#include "train/keys.hpp"

namespace sieve {

// The keys shared by every training section (pretrain.*, scaled.*): model, optimizer,
// schedule, batch, checkpoints. Declared once here so both stages stay in step;
// read_train_options (train/options.cpp) reads them under the same prefix.
void add_trainer_keys(ConfigSchema& s, const std::string& p, const std::string& arch,
                      int64_t epochs, int64_t global_batch, double lr, int64_t ref_batch,
                      double warmup_epochs, int64_t lars_from_batch) {
  s.add_string(p + ".model.arch", arch, "network architecture",
               {"mlp", "resnet18", "resnet34", "resnet50", "resnet101", "resnet152"});
  s.add_float(p + ".model.width", 1.0,
              "ResNet width multiplier of the base widths 64,128,256,512 (1 = torchvision)", 0.01,
              64.0);
  s.add_string(p + ".model.stem", "cifar",
               "ResNet stem: cifar (3x3 conv, no max-pool) or imagenet (7x7/2 conv + max-pool)",
               {"cifar", "imagenet"});
  s.add_int_list(p + ".model.hidden", {256}, "MLP: hidden layer sizes", 1);
  s.add_bool(p + ".model.zero_init_residual", false,
             "ResNet: start the last BN of every residual block at weight 0, so that each block "
             "starts as the identity (Goyal et al. 2017; torchvision's zero_init_residual): "
             "steadier first steps at large batch");
  s.add_string(p + ".backend", "cpu",
               "compute backend: cpu (oneDNN + OpenBLAS), cuda (cuDNN + cuBLAS, one GPU per "
               "rank) or ref (naive loops, for tests)",
               {"cpu", "cuda", "ref"});
  s.add_string(p + ".precision", "auto",
               "activation precision: bf16 (mixed precision: bf16 convolutions and GEMMs, fp32 "
               "master weights, optimizer and BN statistics), fp32, or auto (bf16 where the "
               "hardware computes it natively and faster than fp32: AMX CPUs, or a one-off "
               "probe of one convolution on other AVX512-BF16 CPUs; Ampere+ GPUs; else fp32; "
               "on such a CPU one timed training step of the run's own network in each dtype "
               "then decides, since narrow networks run slower in bf16 (train_scaled records "
               "it in <sweep>/auto_precision/ for every run of that network); a resumed run "
               "keeps its checkpoint's)",
               {"auto", "bf16", "fp32"});
  s.add_string(p + ".param_home", "auto",
               "where the optimizer step meets the parameters: host (the model's own buffers; "
               "cpu and ref backends), staged (fp32 host master copies of a device model: "
               "gradients down and parameters up every step), device (the backend's memory: "
               "SGD/LARS and the non-finite check as backend ops, gradients reduced by the "
               "backend in buckets during backward, NCCL on cuda; needs comm.strategy buckets) "
               "or auto (host on the CPU; staged on cuda until the device home is verified on "
               "a GPU: scripts/gpu_check.sh); docs/training.md",
               {"auto", "host", "staged", "device"});
  s.add_int(p + ".epochs", epochs, "training epochs", 1);
  s.add_int(p + ".global_batch", global_batch,
            "global batch size (all ranks together; per-rank batch = global_batch / ranks)", 1);
  s.add_int(p + ".micro_batch", 0,
            "largest per-rank micro-batch held in memory at once; a larger per-rank batch is "
            "split and its gradients accumulated (0: no limit)",
            0);
  s.add_int(p + ".seed", 0, "training seed (0: derived from run.seed)", 0);
  s.add_bool(p + ".augment", true,
             "images: a random shift by up to an eighth of the side, zero padding (4 pixels on "
             "32x32 and 28x28, CIFAR's crop with padding 4; 1 on 8x8), and a flip (augment_flip)");
  s.add_bool(p + ".augment_flip", true,
             "with augment: also flip images left to right (false for digits, letters and "
             "anything else a mirror changes the class of)");
  s.add_float(p + ".label_smoothing", 0.0, "label smoothing of the cross-entropy", 0.0, 0.99);
  s.add_float(p + ".optimizer.lr", lr, "base learning rate (at schedule.ref_batch)", 0.0);
  s.add_float(p + ".optimizer.momentum", 0.9, "SGD momentum", 0.0, 0.9999);
  s.add_bool(p + ".optimizer.nesterov", true, "Nesterov momentum");
  s.add_float(p + ".optimizer.weight_decay", 5e-4, "weight decay", 0.0);
  s.add_bool(p + ".optimizer.decoupled", false,
             "decoupled weight decay (w -= lr*wd*w) instead of L2 added to the gradient");
  s.add_bool(p + ".optimizer.decay_bn_bias", false, "apply weight decay to BN and bias parameters");
  s.add_bool(p + ".optimizer.lars", false,
             "LARS: per-layer trust ratio eta*|w|/(|g|+wd*|w|) (BN and bias excluded)");
  s.add_float(p + ".optimizer.lars_eta", 0.001, "LARS trust coefficient", 0.0);
  s.add_int(p + ".optimizer.lars_from_batch", lars_from_batch,
            "use LARS whenever global_batch is at least this (0: only when optimizer.lars)", 0);
  s.add_int(p + ".schedule.ref_batch", ref_batch,
            "reference batch of optimizer.lr for linear scaling lr*global_batch/ref_batch "
            "(0: no scaling)",
            0);
  s.add_string(p + ".schedule.scaling", "auto",
               "how the LR follows global_batch/ref_batch = r: linear (lr*r), sqrt (lr*sqrt(r)) "
               "or auto (linear up to r = 8, square root beyond; docs/training.md)",
               {"auto", "linear", "sqrt"});
  s.add_float(p + ".schedule.warmup_epochs", warmup_epochs,
              "gradual warm-up (epochs): LR rises linearly from ~0 to the scaled LR", 0.0);
  s.add_string(p + ".schedule.decay", "cosine", "LR decay after warm-up",
               {"none", "step", "cosine"});
  s.add_int_list(p + ".schedule.milestones", {}, "step decay: epochs where LR *= gamma", 0);
  s.add_float(p + ".schedule.gamma", 0.1, "step decay factor", 0.0, 1.0);
  s.add_int(p + ".checkpoint.every_steps", 0, "checkpoint every N optimizer steps (0: off)", 0);
  s.add_int(p + ".checkpoint.every_epochs", 1, "checkpoint every N epochs (0: off)", 0);
  s.add_int(p + ".checkpoint.keep", 2, "checkpoints kept (oldest removed)", 1);
  s.add_int(p + ".eval_batch", 256, "batch size for evaluation", 1);
  s.add_int(p + ".eval_every", 1, "evaluate the test split every N epochs (0: only at the end)", 0);
  // Gradient communication (libcore/train/grad_sync.hpp; docs/training.md "Communication").
  s.add_string(p + ".comm.strategy", "buckets",
               "how ranks combine gradients: buckets (DDP-style static buckets overlapped with "
               "backward), fusion-queue (Horovod-style negotiated fusion), parameter-server "
               "(shards on owner ranks: push gradients, update, pull weights)",
               {"buckets", "fusion-queue", "parameter-server"});
  s.add_float(p + ".comm.bucket_mb", 4.0,
              "buckets: bucket size; parameter-server: push/pull piece size (MiB)", 0.004);
  s.add_float(p + ".comm.cycle_ms", 1.0,
              "fusion-queue: time between the ranks' agreement rounds (ms)", 0.0);
  s.add_float(p + ".comm.fusion_mb", 64.0, "fusion-queue: largest fused buffer (MiB)", 0.004);
  s.add_int(p + ".comm.servers", 1,
            "parameter-server: shards / server ranks (co-located on workers; at most the ranks)",
            1);
  s.add_string(p + ".comm.mode", "sync",
               "parameter-server: sync, or async (stale-synchronous: a round's update is applied "
               "max_staleness steps later, its push overlapping those steps)",
               {"sync", "async"});
  s.add_int(p + ".comm.max_staleness", 1,
            "parameter-server async: most recent updates a worker's weights may miss (0: sync)", 0,
            64);
  s.add_string(p + ".comm.stale_compensation", "local-gradient",
               "parameter-server async: what workers compute on while k updates are in flight: "
               "local-gradient (the true weights advanced by the in-flight rounds, each estimated "
               "by the shard owner's own gradient), momentum (advanced by the momentum alone) or "
               "none (the stale weights); docs/communication.md",
               {"local-gradient", "momentum", "none"});
}

namespace {

// `<p>.loss` and `<p>.gce_q`; pretrain also offers auto (train/loss_auto.hpp), which needs the
// held-out curve only pretrain has.
void add_loss_keys(ConfigSchema& s, const std::string& p, bool offer_auto) {
  const std::string what =
      "training loss: cross_entropy, or gce (generalized cross-entropy, (1 - p^q)/q: each "
      "sample's gradient scaled by p^q, its given label's probability, so that wrong labels are "
      "fitted later; docs/training.md)";
  if (offer_auto)
    s.add_string(p + ".loss", "auto",
                 what +
                     ", or auto: cross_entropy, and where that run memorised its labels "
                     "(pretrain.early_pick's test) a second run with gce, whose models are "
                     "kept (measured to find more wrong labels on such data; about twice the "
                     "pretraining time where it fires; without pretrain.holdout: "
                     "cross_entropy; docs/detection.md)",
                 {"auto", "cross_entropy", "gce"});
  else
    s.add_string(p + ".loss", "cross_entropy", what, {"cross_entropy", "gce"});
  s.add_float(p + ".gce_q", 0.7, "gce: the exponent q (0: cross-entropy, 1: mean absolute error)",
              0.01, 1.0);
}

}  // namespace

// Keys of the 'pretrain' section: the feature extractor (tools/pretrain).
void add_pretrain_keys(ConfigSchema& s) {
  add_trainer_keys(s, "pretrain", "resnet18", 30, 256, 0.1, 0, 0.0, 0);
  add_loss_keys(s, "pretrain", true);
  s.add_float("pretrain.holdout", 0.1,
              "fraction of each class of the training split held out of pretraining (seeded); "
              "the model at the held-out accuracy's early peak (pretrain.early_pick), "
              "before the network memorises noisy labels, is written as model_early.h5 and is "
              "what extract_features uses by default (0: no hold-out, no early model; "
              "docs/detection.md)",
              0.0, 0.5);
  s.add_float("pretrain.early_margin_se", 1.0,
              "the guarded pick (pretrain.early_pick): a later epoch replaces it only when its "
              "held-out accuracy beats the kept one by more than this many standard errors of "
              "that estimate (sqrt(p(1-p)/n), "
              "n held-out samples): the earliest model no later epoch measurably beats, so that "
              "a small hold-out's noise does not pick a memorised epoch (0: every new peak; "
              "docs/detection.md)",
              0.0, 10.0);
  // auto: the guard is there for runs that reach memorisation; on runs that never do, it only
  // picks an under-trained epoch (docs/detection.md, twelfth session).
  s.add_string("pretrain.early_pick", "auto",
               "which epoch is the early model: guarded (the earliest that no later epoch beats "
               "by pretrain.early_margin_se standard errors), peak (the highest held-out "
               "accuracy), or auto: guarded when the run memorised its training labels (the "
               "last epoch's training accuracy on them exceeds the held-out peak by more than "
               "half of that peak's error), else the peak (docs/detection.md)",
               {"auto", "guarded", "peak"});
  s.add_bool("pretrain.dynamics", true,
             "record every training sample's margin (assigned logit minus the largest other) at "
             "every epoch into dynamics.h5 beside the model: the training-dynamics detector's "
             "input (4 bytes per sample per epoch; train/dynamics.hpp)");
  s.add_int("pretrain.folds", 0,
            "cross-fitting: after the model above, train K more models with this section's "
            "recipe, model k without fold k of the training split (stratified, seeded), keeping "
            "each at its fold's accuracy peak too (model_fold<k>.h5, model_fold<k>_early.h5); "
            "extract_features then scores every training sample with the model that never saw "
            "it (features.fold_models). Costs about K-1 more pretrainings (K models on (K-1)/K of "
            "the data each); 1 is refused (0: off; docs/detection.md)",
            0, 64);
}

// Keys of the 'scaled' section: the large-batch retraining (tools/train_scaled) and its
// sweep grid. Model/optimizer/schedule keys are the same as pretrain's.
void add_scaled_keys(ConfigSchema& s) {
  // The sweep changes the batch, so the recipe follows it by default: optimizer.lr holds at
  // batch 256 and scales by schedule.scaling (auto) with one warm-up epoch (Goyal et al.),
  // and batches of 4096 and more train with LARS (You et al.); docs/training.md.
  add_trainer_keys(s, "scaled", "resnet18", 30, 256, 0.1, 256, 1.0, 4096);
  add_loss_keys(s, "scaled", false);
  s.add_string("scaled.arm", "full",
               "training data: full, filtered (filter /keep) or random (filter /random_keep)",
               {"full", "filtered", "random"});
  s.add_string("scaled.budget", "epochs",
               "what the arms hold equal: epochs (every arm trains scaled.epochs, so an arm "
               "with fewer samples takes fewer optimizer steps: the paper's comparison) or "
               "steps (the filtered and random arms train as many epochs as bring their "
               "steps nearest the full arm's, warm-up and milestones scaled alike; "
               "docs/training.md)",
               {"epochs", "steps"});
  s.add_tree("scaled.sweep",
             "sweep grid: key -> list of values (keys: global_batch, arm, seed, weight_decay, "
             "lr, or any scaled.* key path); expanded as a cartesian product, see "
             "docs/training.md");
}

// Keys of the 'features' section: extract_features.
void add_features_keys(ConfigSchema& s) {
  s.add_int("features.batch", 256, "samples per forward pass (per rank)", 1);
  s.add_bool("features.test", true, "also extract the test split");
  s.add_int("features.block_samples", 0,
            "samples each rank reads, embeds and writes at a time (0: about 64 MiB of input "
            "samples, a multiple of features.batch): a rank's memory stays one block plus the "
            "model, whatever the dataset's size",
            0);
  s.add_string("features.backend", "cpu", "compute backend of the forward passes: cpu, cuda or ref",
               {"cpu", "cuda", "ref"});
  s.add_string(
      "features.precision", "auto",
      "activation precision of the forward passes: auto (bf16 where native and faster than "
      "fp32), bf16 or "
      "fp32 (features are written in fp32 either way)",
      {"auto", "bf16", "fp32"});
  s.add_string("features.model", "auto",
               "which pretrained model to embed with: early (pretrain/model_early.h5, the "
               "held-out accuracy peak), final (pretrain/model.h5), or auto (early when pretrain "
               "wrote one, else final; the choice is logged and recorded); --model overrides",
               {"auto", "early", "final"});
  s.add_string("features.flip_average", "auto",
               "pass each image also mirrored left to right and average the two passes' features "
               "and probabilities (test-time augmentation): on, off, or auto (on where the model "
               "was trained with the flip: pretrain.augment and pretrain.augment_flip in its "
               "recorded config, on an image dataset; recorded as the attribute flip_average)",
               {"auto", "on", "off"});
  s.add_string("features.fold_models", "early",
               "where pretrain wrote cross-fitted fold models (pretrain.folds >= 2): /train/probs "
               "are out-of-fold, each training sample scored by the fold model that never trained "
               "on it, taken at its fold's held-out peak (early) or at the end of its schedule "
               "(final); off: in-sample probabilities of the model above. Features and test "
               "probabilities always come from that model (docs/detection.md)",
               {"early", "final", "off"});
}

}  // namespace sieve
