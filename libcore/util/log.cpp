#include "util/log.hpp"

#include <cmath>
#include <cstdio>

namespace sieve::log {
namespace {
int g_rank = 0;
int g_size = 1;
std::string g_tool = "sieve";
bool g_speaks = true;  // whether info and warn print on this rank
std::string g_prefix;  // before each info and warn message (GroupScope)
}  // namespace

void set_rank(int rank, int size) {
  g_rank = rank;
  g_size = size;
  g_speaks = rank == 0;
}

GroupScope::GroupScope(bool group_root, std::string prefix)
    : saved_speaks_(g_speaks), saved_prefix_(std::move(g_prefix)) {
  g_speaks = group_root;
  g_prefix = std::move(prefix);
}

GroupScope::~GroupScope() {
  g_speaks = saved_speaks_;
  g_prefix = std::move(saved_prefix_);
}
int rank() { return g_rank; }
bool is_root() { return g_rank == 0; }
void set_tool_name(const std::string& name) { g_tool = name; }
const std::string& tool_name() { return g_tool; }

void info(const std::string& msg) {
  if (!g_speaks) return;
  std::fprintf(stderr, "%s: %s%s\n", g_tool.c_str(), g_prefix.c_str(), msg.c_str());
  std::fflush(stderr);
}

void warn(const std::string& msg) {
  if (!g_speaks) return;
  std::fprintf(stderr, "%s: %swarning: %s\n", g_tool.c_str(), g_prefix.c_str(), msg.c_str());
  std::fflush(stderr);
}

void error(const std::string& msg, bool with_rank) {
  if (g_size > 1 && with_rank)
    std::fprintf(stderr, "%s: error: [rank %d] %s\n", g_tool.c_str(), g_rank, msg.c_str());
  else
    std::fprintf(stderr, "%s: error: %s\n", g_tool.c_str(), msg.c_str());
  std::fflush(stderr);
}

std::string format_duration(double s) {
  char buf[64];
  if (!std::isfinite(s) || s < 0) return "?";
  if (s < 10) {
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  } else if (s < 90) {
    std::snprintf(buf, sizeof buf, "%.0f s", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", int(s) / 3600, (int(s) % 3600) / 60);
  }
  return buf;
}

std::string format_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

Progress::Progress(std::string label, int64_t total, std::string unit, double interval_s)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), interval_s_(interval_s) {
  start_ = last_print_ = std::chrono::steady_clock::now();
}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t done) {
  done_ = done;
  auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last_print_).count() < interval_s_) return;
  last_print_ = now;
  double el = elapsed_s();
  double rate = el > 0 ? done_ / el : 0;
  double eta = rate > 0 ? (total_ - done_) / rate : NAN;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s: %lld/%lld %s (%.0f%%), %.0f %s/s, ETA %s", label_.c_str(),
                (long long)done_, (long long)total_, unit_.c_str(),
                total_ > 0 ? 100.0 * done_ / total_ : 100.0, rate, unit_.c_str(),
                format_duration(eta).c_str());
  info(buf);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  double el = elapsed_s();
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s: %lld %s in %s (%.0f %s/s)", label_.c_str(),
                (long long)done_, unit_.c_str(), format_duration(el).c_str(),
                el > 0 ? done_ / el : 0.0, unit_.c_str());
  info(buf);
}

}  // namespace sieve::log
