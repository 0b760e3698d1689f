#include "data/keys.hpp"

namespace sieve {

void add_data_keys(ConfigSchema& s) {
  s.add_string("data.source", "synthetic", "where the data comes from",
               {"synthetic", "cifar10", "cifar100", "mnist", "csv", "folder"});
  s.add_string("data.path", "",
               "input: CIFAR directory (data_batch_*.bin, test_batch.bin, or CIFAR-100 "
               "train.bin/test.bin), MNIST/Fashion-MNIST directory "
               "(train-images-idx3-ubyte[.gz], ...), a CSV file, or an image folder (torchvision's "
               "ImageFolder layout: one sub-directory of JPEG/PNG files per class, or train/ "
               "and val/ trees of those)");
  s.add_string_list("data.class_names", {},
                    "class names to record instead of the source's own (e.g. Fashion-MNIST's); "
                    "labels must lie in 0..len-1");
  s.add_int(
      "data.seed", -1,
      "seed of the synthetic generator and the CSV train/test split (-1: derived from run.seed)",
      -1);
  // Injected label noise, for every source (docs/data.md "Injected label noise").
  s.add_float("data.label_noise.rate", 0.0,
              "fraction of the training labels flipped by shard_dataset and recorded as "
              "/train/noise_truth and /train/clean_labels, so that detectors can be scored on "
              "any data (exactly round(rate * N) rows; `data.label_noise: 0.2` is short for "
              "this key; on synthetic data, in addition to data.synthetic.label_noise)",
              0.0, 0.9);
  s.add_string("data.label_noise.kind", "symmetric",
               "symmetric (to any other class, uniformly), pairwise (each class to one partner "
               "class: data.label_noise.pairs, or the class a quick pixel model confuses it "
               "with most), instance (the samples that model finds most confusable, to their "
               "most likely wrong class) or projection (Xia et al. 2020's IDN: each row flips "
               "with its own probability ~ N(rate, 0.1), to the wrong class of largest random "
               "projection of its pixels)",
               {"symmetric", "pairwise", "instance", "projection"});
  s.add_int("data.label_noise.seed", -1,
            "seed of the choice of rows (and of the quick model's folds) (-1: data.seed, or "
            "the seed derived from run.seed)",
            -1);
  s.add_tree("data.label_noise.pairs",
             "pairwise: class map {from: to, ...} by class index (classes not named keep "
             "their labels); empty: each class to the class the quick model confuses it with "
             "most");
  s.add_shorthand("data.label_noise", "data.label_noise.rate");
  s.add_string("data.loader", "auto",
               "how training reads its samples: memory (every rank holds the whole split; the "
               "exact global permutation), stream (each rank reads its own chunks in windows of "
               "at most a quarter of data.memory_budget_mb; the order depends on the rank count), "
               "or auto (stream when the split's sample bytes exceed data.memory_budget_mb)",
               {"auto", "memory", "stream"});
  s.add_float("data.memory_budget_mb", 4096,
              "per-rank memory (MB) for training samples: data.loader auto streams a training "
              "split larger than this, and streaming keeps its windows (and evaluation reads) "
              "within it",
              0.001);
  s.add_string("data.csv.label_column", "label", "CSV: name of the label column");
  s.add_float("data.csv.test_fraction", 0.2,
              "CSV: fraction of rows held out as test set (stratified by class)", 0.0, 0.9);
  s.add_int("data.folder.size", 224,
            "folder: side of the square images written (the centre crop after resizing)", 4, 4096);
  s.add_int("data.folder.resize", 0,
            "folder: the shorter side is resized to this before the centre crop (0: "
            "data.folder.size; torchvision's Resize(256) + CenterCrop(224) is resize 256, size "
            "224)",
            0, 8192);
  s.add_int("data.folder.channels", 3, "folder: 3 (RGB) or 1 (grayscale, ITU-R 601-2 luma)", 1, 3);
  s.add_string("data.folder.on_error", "fail",
               "folder: what an unreadable image (empty, not JPEG/PNG, corrupt) does: fail (one "
               "error naming the first and the count, nothing written) or skip (left out, "
               "listed in the dataset's skipped_inputs attribute; every image is decoded once "
               "more up front to find them)",
               {"fail", "skip"});
  s.add_float("data.folder.test_fraction", 0.1,
              "folder without a val/ (or test/) tree: fraction of each class held out as the "
              "test split (seeded by data.seed)",
              0.0, 0.9);
  s.add_int("data.shards", 1,
            "number of shard files (1: one self-contained file; K > 1: K shard files plus an "
            "index file of virtual datasets at the output path)",
            1, 4096);
  s.add_int("data.chunk_samples", 0,
            "samples per HDF5 chunk of images/features (0: automatic, whole samples making about "
            "2 MiB, above HDF5's 1 MiB chunk cache so that chunks are written without a copy)",
            0);
  // synthetic generator
  s.add_int("data.synthetic.classes", 10, "synthetic: number of classes", 2, 1000);
  s.add_int("data.synthetic.train_per_class", 500, "synthetic: training samples per class", 1);
  s.add_int("data.synthetic.test_per_class", 100, "synthetic: test samples per class", 0);
  s.add_int("data.synthetic.height", 32, "synthetic: image height", 4, 4096);
  s.add_int("data.synthetic.width", 32, "synthetic: image width", 4, 4096);
  s.add_int("data.synthetic.channels", 3, "synthetic: channels (1 or 3)", 1, 3);
  s.add_float("data.synthetic.label_noise", 0.05,
              "synthetic: fraction of training samples given a wrong label", 0.0, 0.9);
  s.add_float("data.synthetic.outliers", 0.02,
              "synthetic: fraction of training samples replaced by outlier images", 0.0, 0.9);
  s.add_float("data.synthetic.pixel_noise", 0.10,
              "synthetic: std of per-pixel noise as a fraction of the 0..255 range", 0.0, 1.0);
}

}  // namespace sieve
