#include "comm/calibration.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "util/error.hpp"

namespace sieve {

void fit_alpha_beta(CommCalibration& c) {
  SIEVE_CHECK(c.points.size() >= 2, "calibration fit needs at least two message sizes");
  // Normal equations of min sum w (t - a - n b)^2 with w = 1/t.
  double sw = 0, sn = 0, snn = 0, st = 0, snt = 0;
  for (const auto& p : c.points) {
    SIEVE_CHECK(p.seconds > 0, "calibration point with a non-positive time");
    const double w = 1.0 / p.seconds;
    sw += w;
    sn += w * p.bytes;
    snn += w * p.bytes * p.bytes;
    st += w * p.seconds;
    snt += w * p.bytes * p.seconds;
  }
  const double det = sw * snn - sn * sn;
  SIEVE_CHECK(det > 0, "calibration fit: message sizes must differ");
  c.beta_s_per_byte = (sw * snt - sn * st) / det;
  c.alpha_s = (st - c.beta_s_per_byte * sn) / sw;
  if (c.alpha_s < 0) {  // a negative latency is noise: refit the slope through the origin
    c.alpha_s = 0;
    c.beta_s_per_byte = snt / snn;
  }
  double ss_res = 0, ss_tot = 0;
  const double mean = st / sw;
  for (const auto& p : c.points) {
    const double w = 1.0 / p.seconds;
    const double r = p.seconds - c.alpha_s - c.beta_s_per_byte * p.bytes;
    ss_res += w * r * r;
    ss_tot += w * (p.seconds - mean) * (p.seconds - mean);
  }
  c.r2_relative = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
}

RingEquivalent ring_equivalent(const CommCalibration& c) {
  RingEquivalent r;
  const double p = std::max(2, c.ranks);
  r.latency_s = std::max(0.0, c.alpha_s) / (2.0 * (p - 1.0));
  r.bandwidth_bytes_per_s = c.beta_s_per_byte > 0 ? 2.0 * (p - 1.0) / p / c.beta_s_per_byte : 1e18;
  return r;
}

std::string calibration_to_json(const CommCalibration& c) {
  nlohmann::json j;
  j["schema"] = "sieve.comm_calibration/1";
  j["operation"] = c.operation;
  j["ranks"] = c.ranks;
  j["alpha_us"] = c.alpha_s * 1e6;
  j["beta_ns_per_byte"] = c.beta_s_per_byte * 1e9;
  j["r2_relative"] = c.r2_relative;
  const RingEquivalent r = ring_equivalent(c);
  j["ring_latency_us"] = r.latency_s * 1e6;
  j["ring_bandwidth_gbps"] = r.bandwidth_bytes_per_s * 8e-9;
  j["machine"] = c.machine;
  for (const auto& p : c.points)
    j["points"].push_back({{"bytes", p.bytes}, {"us", p.seconds * 1e6}});
  return j.dump(1) + "\n";
}

CommCalibration read_calibration(const std::string& path) {
  std::ifstream f(path);
  SIEVE_CHECK(f.good(), "cannot read the communication calibration ", path);
  CommCalibration c;
  try {
    const auto j = nlohmann::json::parse(f);
    SIEVE_CHECK(j.value("schema", "") == "sieve.comm_calibration/1", path,
                ": not a communication calibration (schema sieve.comm_calibration/1)");
    c.operation = j.at("operation").get<std::string>();
    c.ranks = j.at("ranks").get<int>();
    c.alpha_s = j.at("alpha_us").get<double>() * 1e-6;
    c.beta_s_per_byte = j.at("beta_ns_per_byte").get<double>() * 1e-9;
    c.r2_relative = j.value("r2_relative", 0.0);
    c.machine = j.value("machine", "");
    for (const auto& p : j.at("points"))
      c.points.push_back({p.at("bytes").get<double>(), p.at("us").get<double>() * 1e-6});
  } catch (const nlohmann::json::exception& e) {
    throw Error(cat(path, ": malformed communication calibration: ", e.what()));
  }
  return c;
}

}  // namespace sieve
