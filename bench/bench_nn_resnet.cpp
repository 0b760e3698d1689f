// Training-step throughput of CIFAR ResNet-18 on the CPU backend, and how it compares with
// the machine's SGEMM peak.
//
//   bench_nn_resnet [batch=128] [steps=10] [warmup=2] [arch=resnet18] [width=1.0] [sgemm=1]
//
// One step = zero_grad + forward(training) + softmax CE + backward + plain SGD update. Prints
// the median images/s over the timed steps, the SGEMM GFLOP/s of a large cblas_sgemm (4096^3,
// best of 3; sgemm=0 skips it), and the fraction of it the step reaches. ResNet-18-CIFAR costs
// 0.556 G multiply-adds per image forward (the usual "0.56 GFLOPs"), i.e. 1.11 GFLOP counted
// as sgemm counts (2 per multiply-add); training ~3x forward = 3.34 GFLOP/img. The FLOP figure
// is for resnet18 width 1 only. Threads: OMP_NUM_THREADS (oneDNN) and OPENBLAS_NUM_THREADS.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "nn/model.hpp"

using namespace sieve::nn;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

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

int main(int argc, char** argv) {
  const int batch = argc > 1 ? std::atoi(argv[1]) : 128;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 10;
  const int warmup = argc > 3 ? std::atoi(argv[3]) : 2;
  ModelSpec spec;
  spec.arch = argc > 4 ? argv[4] : "resnet18";
  spec.width = argc > 5 ? std::atof(argv[5]) : 1.0;
  const bool do_sgemm = argc > 6 ? std::atoi(argv[6]) != 0 : true;
  spec.num_classes = 10;
  auto model = make_model(spec);
  init_params(*model, 1);

  std::mt19937 g(1);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(size_t(batch) * model->input_size());
  for (float& v : x) v = d(g);
  std::vector<int32_t> y(batch);
  for (int i = 0; i < batch; ++i) y[i] = i % 10;
  std::vector<float> dz(size_t(batch) * 10);

  std::vector<double> times;
  for (int s = 0; s < warmup + steps; ++s) {
    auto t = Clock::now();
    model->zero_grad();
    const float* z = model->forward(x.data(), batch, true);
    softmax_cross_entropy(z, y.data(), batch, 10, 0.f, dz.data(), nullptr);
    model->backward(dz.data());
    float* p = model->params();
    const float* gr = model->grads();
    const size_t np = model->num_params();
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < np; ++i) p[i] -= 0.01f * gr[i];
    if (s >= warmup) times.push_back(seconds_since(t));
  }
  std::sort(times.begin(), times.end());
  const double med = times[times.size() / 2];
  const double ips = batch / med;
  const double train_gflop_per_img = 2 * 0.556 * 3;
  std::printf("model            %s width %.3g (CIFAR stem), batch %d, threads %d\n",
              spec.arch.c_str(), spec.width, batch, omp_get_max_threads());
  std::printf("step median      %.3f s over %d steps (min %.3f, max %.3f)\n", med, steps,
              times.front(), times.back());
  std::printf("images/s         %.1f\n", ips);
  std::printf("train GFLOP/s    %.1f (%.2f GFLOP/img x %.1f img/s)\n", ips * train_gflop_per_img,
              train_gflop_per_img, ips);
  if (do_sgemm) {
    const double peak = sgemm_gflops();
    std::printf("sgemm GFLOP/s    %.1f (4096^3, best of 3): the step reaches %.0f%% of it\n", peak,
                100.0 * ips * train_gflop_per_img / peak);
  }
  std::printf("RESULT sieve_images_per_s %.2f\n", ips);
  return 0;
}
