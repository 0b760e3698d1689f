// Shared by the data-parallel MPI tests (test_train_parallel, test_train_comm): a tiny image
// split in memory and the short training recipe they compare ranks and strategies on.
#pragma once
#include <string>

#include "train/trainer.hpp"
#include "unit/test_train_util.hpp"

namespace sieve::test {

struct ImageData {
  train::SplitData train;
  train::DatasetMeta meta;
};

// n 8x8x3 images of 4 classes (a bright quadrant per class), ids from `id0`.
inline ImageData image_data(int n, uint64_t seed = 3, int64_t id0 = 10) {
  ImageData d;
  auto s = synthetic_images(n, 4, seed, id0, 8);
  d.train.image = true;
  d.train.n = n;
  d.train.h = d.train.w = 8;
  d.train.c = 3;
  d.train.images = s.images;
  d.train.labels = s.labels;
  d.train.sample_id = s.ids;
  d.meta.num_classes = 4;
  d.meta.mean = {0.5, 0.5, 0.5};
  d.meta.std = {0.25, 0.25, 0.25};
  d.meta.kind = data::Kind::Image;
  return d;
}

// 2 epochs of global batch 12 (width-1/8 ResNet or a 16-unit MLP), SGD with momentum and
// cosine decay, no checkpoints or evaluation.
inline train::TrainOptions short_run_options(const std::string& arch, int64_t micro) {
  train::TrainOptions o;
  o.spec.arch = arch;
  o.spec.width = 0.125;
  o.spec.mlp_hidden = {16};
  o.epochs = 2;
  o.global_batch = 12;
  o.micro_batch = micro;
  o.seed = 7;
  o.augment = {true, true};
  o.opt.momentum = 0.9;
  o.opt.weight_decay = 1e-4;
  o.sched.base_lr = 0.05;
  o.sched.decay = train::Decay::Cosine;
  o.ckpt_every_epochs = 0;
  o.eval_every = 0;
  return o;
}

}  // namespace sieve::test
