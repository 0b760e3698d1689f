// Throughput of the synthetic image generator alone (no I/O): images/s and MB/s.
//   bench_data_synth [images=20000] [size=32] [threads from OMP_NUM_THREADS]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "data/synthetic.hpp"

int main(int argc, char** argv) {
  int64_t n = argc > 1 ? std::atoll(argv[1]) : 20000;
  int side = argc > 2 ? std::atoi(argv[2]) : 32;
  sieve::data::SyntheticSpec spec;
  spec.classes = 10;
  spec.train_per_class = (n + 9) / 10;
  spec.height = spec.width = side;
  sieve::data::SyntheticGenerator gen(spec);
  n = gen.rows(sieve::data::Split::Train);
  const int64_t batch = 4096;
  std::vector<uint8_t> img(size_t(batch * gen.row_bytes()));
  std::vector<int32_t> labels(batch);
  std::vector<uint8_t> noise(batch);
  auto t0 = std::chrono::steady_clock::now();
  uint64_t check = 0;
  for (int64_t a = 0; a < n; a += batch) {
    int64_t c = std::min(batch, n - a);
    gen.generate_batch(sieve::data::Split::Train, a, c, img.data(), labels.data(), noise.data());
    check += img[0] + uint64_t(labels[0]);
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double mb = double(n) * double(gen.row_bytes()) / 1e6;
  std::printf("bench_data_synth: %lld images %dx%dx3, %d thread(s): %.2f s, %.0f images/s, %.1f MB/s (check %llu)\n",
              (long long)n, side, side, omp_get_max_threads(), s, double(n) / s, mb / s,
              (unsigned long long)check);
  return 0;
}
