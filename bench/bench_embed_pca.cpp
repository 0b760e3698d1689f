// PCA throughput: N x F float32 Gaussian-cluster data -> k components (fit + projection),
// the part of reduce_dims that scripts/bench_embed.sh compares with scikit-learn's PCA.
// Usage: bench_embed_pca [N=50000] [F=512] [k=50]   (run under mpirun for the distributed fit)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "embed/pca.hpp"

int main(int argc, char** argv) {
  sieve::MpiSession mpi(&argc, &argv);
  sieve::Comm world = sieve::Comm::world();
  const int64_t N = argc > 1 ? std::atoll(argv[1]) : 50000;
  const int64_t F = argc > 2 ? std::atoll(argv[2]) : 512;
  const int64_t k = argc > 3 ? std::atoll(argv[3]) : 50;
  sieve::Range r = sieve::block_range(N, world.rank(), world.size());
  std::mt19937_64 rng(1 + world.rank());
  std::normal_distribution<float> g;
  std::vector<float> x(static_cast<size_t>(r.size() * F)), out(static_cast<size_t>(r.size() * k));
  for (int64_t i = 0; i < r.size(); ++i)
    for (int64_t j = 0; j < F; ++j) x[i * F + j] = g(rng) + (j == (r.begin + i) % 10 ? 8.f : 0.f);
  world.barrier();
  auto t0 = std::chrono::steady_clock::now();
  sieve::embed::PcaModel m = sieve::embed::pca_fit(world, x.data(), r.size(), F, k, false);
  sieve::embed::pca_transform(m, x.data(), r.size(), out.data());
  world.barrier();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (world.is_root())
    std::printf("sieve_pca n=%lld f=%lld k=%lld ranks=%d seconds=%.3f explained=%.4f\n",
                (long long)N, (long long)F, (long long)k, world.size(), s, m.explained_ratio[0]);
  return 0;
}
