// Training-step throughput of a ResNet on one backend, and how it compares with the machine's
// SGEMM peak (CPU backends).
//
//   bench_nn_resnet [batch=128] [steps=10] [warmup=2] [arch=resnet18] [width=1.0] [sgemm=1]
//                   [backend=cpu] [precision=fp32] [stem=cifar] [input=32] [pass=train]
//
// pass train: one step = zero_grad + forward(training) + softmax CE on the host + backward +
// plain SGD update (the backend's axpy over the flat parameter buffer, on the model's device).
// Each timed step ends by reading 4 bytes of the parameters back, which waits for a GPU
// backend's queued work, so the median covers the whole step, input upload and logits
// download included.
// pass infer: one step = forward in eval mode (batch norm on its running statistics), the
// logits read back to the host: what extract_features does per batch. Prints the median images/s;
// on the CPU also the SGEMM GFLOP/s of a large cblas_sgemm (4096^3, best of 3; sgemm=0 skips it)
// and the fraction of it the step reaches. precision: fp32 | bf16 | auto (resolve_precision). stem
// imagenet (7x7/2 + max pool) with 1000 classes, cifar with 10. Training FLOPs (~3x forward, 2 per
// multiply-add) are printed for the configurations whose forward cost is known: CIFAR ResNet-18
// (0.556 G multiply-adds per image) and ImageNet ResNet-50 at 224 (4.09 G); inference is 1x
// forward. Threads: OMP_NUM_THREADS (oneDNN) and OPENBLAS_NUM_THREADS.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "nn/backend.hpp"
#include "nn/model.hpp"
#include "util/clock.hpp"
#include "util/error.hpp"

using namespace sieve::nn;
using sieve::Clock;
using sieve::seconds_since;

static double sgemm_gflops() {
  const int n = 4096;
  std::vector<float> a(size_t(n) * n, 1.f), b(size_t(n) * n, 0.5f), c(size_t(n) * n);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n,
                0.f, c.data(), n);
    best = std::max(best, 2.0 * n * n * n / seconds_since(t) / 1e9);
  }
  return best;
}

// Forward multiply-adds per image (G), where known.
static double forward_gmacs(const ModelSpec& s) {
  if (s.width != 1.0) return 0;
  if (s.arch == "resnet18" && s.stem == "cifar" && s.in_height == 32) return 0.556;
  if (s.arch == "resnet50" && s.stem == "imagenet" && s.in_height == 224) return 4.09;
  return 0;
}

static const char* kUsage =
    "usage: bench_nn_resnet [batch=128] [steps=10] [warmup=2] [arch=resnet18] [width=1.0]\n"
    "                       [sgemm=1] [backend=cpu] [precision=fp32] [stem=cifar] [input=32]\n"
    "                       [pass=train|infer]\n";

// Positional argument i as a number of at least `min` (a whole one up to 2^31 - 1 if
// `whole`), or `fallback` when absent.
static double number_arg(int argc, char** argv, int i, const char* name, double fallback,
                         double min, bool whole = true) {
  if (argc <= i) return fallback;
  char* end = nullptr;
  const double v = std::strtod(argv[i], &end);
  if (end == argv[i] || *end != '\0' || !(v >= min) || !std::isfinite(v) ||
      (whole && (v != std::floor(v) || v > 2147483647.0)))
    throw sieve::UsageError(sieve::cat("argument ", i, " (", name, ") '", argv[i], "': expected ",
                                       whole ? "a whole number" : "a number", " >= ", min,
                                       " (see --help)"));
  return v;
}

static int run(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  const int batch = int(number_arg(argc, argv, 1, "batch", 128, 1));
  const int steps = int(number_arg(argc, argv, 2, "steps", 10, 1));
  const int warmup = int(number_arg(argc, argv, 3, "warmup", 2, 0));
  ModelSpec spec;
  spec.arch = argc > 4 ? argv[4] : "resnet18";
  spec.width = number_arg(argc, argv, 5, "width", 1.0, 1e-3, false);
  const bool do_sgemm = number_arg(argc, argv, 6, "sgemm", 1, 0) != 0;
  spec.backend = argc > 7 ? argv[7] : "cpu";
  const std::string precision = argc > 8 ? argv[8] : "fp32";
  spec.stem = argc > 9 ? argv[9] : "cifar";
  spec.in_height = spec.in_width = int(number_arg(argc, argv, 10, "input", 32, 1));
  spec.num_classes = spec.stem == "imagenet" ? 1000 : 10;
  const std::string pass = argc > 11 ? argv[11] : "train";
  if (pass != "train" && pass != "infer")
    throw sieve::UsageError(
        sieve::cat("argument 11 (pass) '", pass, "': expected train or infer (see --help)"));
  const bool train = pass == "train";
  std::string note;
  spec.dtype = resolve_precision(precision, spec.backend, "precision", &note);
  if (!note.empty()) std::fprintf(stderr, "bench_nn_resnet: %s\n", note.c_str());
  auto model = make_model(spec);
  init_params(*model, 1);
  Backend& be = model->backend();
  const int k = spec.num_classes;

  std::mt19937 g(1);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(size_t(batch) * model->input_size());
  for (float& v : x) v = d(g);
  std::vector<int32_t> y(batch);
  for (int i = 0; i < batch; ++i) y[i] = i % k;
  std::vector<float> dz(size_t(batch) * k);

  std::vector<double> times;
  for (int s = 0; s < warmup + steps; ++s) {
    auto t = Clock::now();
    if (train) {
      model->zero_grad();
      const float* z = model->forward(x.data(), batch, true);
      softmax_cross_entropy(z, y.data(), batch, k, 0.f, dz.data(), nullptr);
      model->backward(dz.data());
      be.axpy(-0.01f, model->grads(), model->params(), model->num_params());
      float probe;
      be.to_host(&probe, model->params(), sizeof(float));  // waits for the device's queue
    } else {
      model->forward(x.data(), batch, false);  // returns the logits on the host: all is done
    }
    if (s >= warmup) times.push_back(seconds_since(t));
  }
  std::sort(times.begin(), times.end());
  const double med = times[times.size() / 2];
  const double ips = batch / med;
  std::printf(
      "model            %s width %.3g (%s stem, %dx%d), batch %d, backend %s %s, "
      "threads %d, pass %s\n",
      spec.arch.c_str(), spec.width, spec.stem.c_str(), spec.in_height, spec.in_width, batch,
      spec.backend.c_str(), dtype_name(spec.dtype), omp_get_max_threads(), pass.c_str());
  std::printf("step median      %.4f s over %d steps (min %.4f, max %.4f)\n", med, steps,
              times.front(), times.back());
  std::printf("images/s         %.1f\n", ips);
  const double gflop_per_img = 2 * forward_gmacs(spec) * (train ? 3 : 1);
  if (gflop_per_img > 0)
    std::printf("%s GFLOP/s    %.1f (%.2f GFLOP/img x %.1f img/s)\n", train ? "train" : "infer",
                ips * gflop_per_img, gflop_per_img, ips);
  if (do_sgemm) {
    const double peak = sgemm_gflops();
    std::printf("sgemm GFLOP/s    %.1f (4096^3, best of 3)", peak);
    if (gflop_per_img > 0)
      std::printf(": the step reaches %.0f%% of it", 100.0 * ips * gflop_per_img / peak);
    std::printf("\n");
  }
  std::printf("RESULT sieve_images_per_s %.2f\n", ips);
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const sieve::Error& e) {  // e.g. backend cuda on a machine without a GPU
    std::fprintf(stderr, "bench_nn_resnet: %s\n", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "bench_nn_resnet: out of memory (batch too large for the device?)\n");
    return 1;
  }
}
