// A measured latency/bandwidth model of this machine's allreduce: t(n) = alpha + n * beta,
// fitted by least squares to OSU-style timings over message sizes (bench_core_allreduce,
// scripts/bench_comm.sh). The report's a-priori scaling model uses it instead of the
// configured network figures when a calibration file is given (report.network.calibration).
//
// Fit: weighted least squares, sum_i (t_i - alpha - n_i beta)^2 / t_i, alpha >= 0. Over seven
// decades of sizes no single line fits every point; the weights decide which it serves. Plain
// least squares fits the megabyte points only (on this machine alpha came out at -120 us);
// relative weights 1/t^2 let the many latency-bound points set the slope too (bandwidth 6x
// too high at 16 MiB). 1/t keeps both ends: on 4 ranks here alpha within 0.1 us of the 4-byte
// time and the 16 MiB time within 5 %. r2_relative says how well the line fits.
//
// The ring model (report/estimates.hpp) reads the fit through ring_equivalent(): for p ranks a
// ring allreduce costs 2(p-1) latencies and moves 2(p-1)/p of the bytes per link, so the
// fitted alpha and beta at the measured p give the per-message latency and link bandwidth
// that ring formula needs at any other p.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sieve {

struct CommPoint {
  double bytes = 0;
  double seconds = 0;  // per allreduce: the slowest rank's mean over the iterations
};

struct CommCalibration {
  int ranks = 0;
  std::string operation = "allreduce";
  double alpha_s = 0;          // fitted intercept: seconds per call
  double beta_s_per_byte = 0;  // fitted slope: seconds per byte
  double r2_relative = 0;      // 1 - weighted residual / weighted total (how well the line fits)
  std::vector<CommPoint> points;
  std::string machine;  // CPU model, cores, oversubscription: what was measured
};

// Weighted least squares fit of t = alpha + n*beta (weights 1/t, alpha >= 0). Needs >= 2 sizes.
void fit_alpha_beta(CommCalibration& c);

// Per-message latency (s) and per-link bandwidth (bytes/s) of a ring allreduce that gives the
// fitted alpha and beta at c.ranks ranks.
struct RingEquivalent {
  double latency_s = 0, bandwidth_bytes_per_s = 0;
};
RingEquivalent ring_equivalent(const CommCalibration& c);

std::string calibration_to_json(const CommCalibration& c);
// Throws Error naming the file when it is missing or malformed.
CommCalibration read_calibration(const std::string& path);

}  // namespace sieve
