// OSU-style allreduce micro-benchmark (osu_allreduce's method): for message sizes 4 B ... max
// (x4 steps), a barrier, warm-up calls, then timed MPI_Allreduce(SUM, float) calls; the time
// of a size is the slowest rank's mean per call, the best of three batches of calls (this
// machine is shared: a batch that a compiler preempted says nothing about MPI). Fits t(n) = alpha +
// n*beta (comm/calibration.hpp) and writes the calibration JSON the report reads.
//
//   mpirun -n P bench_core_allreduce [out.json] [max_bytes=16777216] [machine description]
//
// Each size runs for about 3 x 0.1 s (at least 5 calls a batch): a sweep takes a few seconds.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "comm/calibration.hpp"
#include "comm/comm.hpp"

using namespace sieve;

namespace {

double time_size(const Comm& comm, std::vector<float>& buf, size_t floats) {
  const int n = int(floats);
  for (int i = 0; i < 3; ++i)  // warm-up: connection set-up, first-touch of the buffers
    SIEVE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, comm.raw()));
  comm.barrier();
  // Calls per size: the same on every rank (decided on rank 0 from one probe call).
  double probe = MPI_Wtime();
  SIEVE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, comm.raw()));
  probe = comm.allreduce_max(MPI_Wtime() - probe);
  int iters = int(std::clamp(0.1 / std::max(probe, 1e-7), 5.0, 2000.0));
  comm.bcast(&iters, 1);
  double best = 1e30;
  for (int batch = 0; batch < 3; ++batch) {
    comm.barrier();
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i)
      SIEVE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, comm.raw()));
    best = std::min(best, comm.allreduce_max((MPI_Wtime() - t0) / iters));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  Comm comm = Comm::world();
  const std::string out = argc > 1 ? argv[1] : "";
  const size_t max_bytes = argc > 2 ? size_t(std::stoull(argv[2])) : size_t(16) << 20;
  CommCalibration cal;
  cal.ranks = comm.size();
  cal.machine = argc > 3 ? argv[3] : "";
  std::vector<float> buf(max_bytes / sizeof(float) + 1, 1.0f);
  if (comm.is_root())
    std::printf("# allreduce, %d ranks\n%12s %14s %12s\n", comm.size(), "bytes", "us", "MB/s");
  for (size_t bytes = 4; bytes <= max_bytes; bytes *= 4) {
    const double t = time_size(comm, buf, bytes / sizeof(float));
    cal.points.push_back({double(bytes), t});
    if (comm.is_root()) std::printf("%12zu %14.2f %12.1f\n", bytes, t * 1e6, bytes / t / 1e6);
  }
  fit_alpha_beta(cal);
  if (comm.is_root()) {
    const RingEquivalent r = ring_equivalent(cal);
    std::printf("fit: alpha %.2f us, beta %.4f ns/byte (%.2f GB/s), weighted R^2 %.4f\n",
                cal.alpha_s * 1e6, cal.beta_s_per_byte * 1e9, 1e-9 / cal.beta_s_per_byte,
                cal.r2_relative);
    std::printf("ring equivalent: latency %.2f us per message, link %.2f Gbit/s\n",
                r.latency_s * 1e6, r.bandwidth_bytes_per_s * 8e-9);
    if (!out.empty()) {
      std::ofstream f(out);
      f << calibration_to_json(cal);
      if (!f) {
        std::fprintf(stderr, "cannot write %s\n", out.c_str());
        return 1;
      }
    }
  }
  return 0;
}
