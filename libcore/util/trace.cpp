#include "util/trace.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "util/error.hpp"

namespace sieve::trace {
namespace {

// A long run at the default keeps its first ~400k spans (~40 MB of JSON per rank): enough
// for hundreds of ResNet steps; the file records how many were dropped.
constexpr size_t kMaxEvents = 400000;

struct Recorder {
  std::string path;
  bool on = false;
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
  std::vector<Event> events;
  size_t dropped = 0;
  std::vector<double> comm_lane_end;  // latest end (us) of a span on each reduction lane
};
Recorder& rec() {
  static Recorder r;
  return r;
}

void append_escaped(std::string& out, const std::string& s) {
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;  // names never need control chars
    out += c;
  }
}

std::string serialize(const std::vector<Event>& evs, int pid) {
  std::string out;
  out.reserve(evs.size() * 110);
  char num[128];
  for (const Event& e : evs) {
    out += "{\"name\":\"";
    append_escaped(out, e.name);
    out += "\",\"cat\":\"";
    out += e.cat;
    std::snprintf(num, sizeof num, "\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f",
                  pid, e.tid, e.ts_us, e.dur_us);
    out += num;
    if (!e.args.empty()) out += ",\"args\":{" + e.args + "}";
    out += "},\n";
  }
  return out;
}

}  // namespace

void enable(const std::string& path) {
  rec().path = path;
  rec().on = !path.empty();
}
bool enabled() {
  return rec().on;
}
const std::string& path() {
  return rec().path;
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - rec().origin)
      .count();
}

void set_origin() {
  rec().origin = std::chrono::steady_clock::now();
}

void complete(std::string name, const char* cat, double t0_us, double t1_us, int tid,
              std::string args) {
  Recorder& r = rec();
  if (!r.on) return;
  if (r.events.size() >= kMaxEvents) {
    ++r.dropped;
    return;
  }
  if (tid == kComm) {  // the first reduction lane free at t0 (spans there never overlap)
    size_t lane = 0;
    while (lane < r.comm_lane_end.size() && r.comm_lane_end[lane] > t0_us) ++lane;
    if (lane == r.comm_lane_end.size()) r.comm_lane_end.push_back(t1_us);
    r.comm_lane_end[lane] = std::max(r.comm_lane_end[lane], t1_us);
    tid = kComm + int(lane);
  }
  r.events.push_back(
      {std::move(name), cat, t0_us, std::max(0.0, t1_us - t0_us), tid, std::move(args)});
}

const std::vector<Event>& events() {
  return rec().events;
}
void clear() {
  rec().events.clear();
  rec().dropped = 0;
  rec().comm_lane_end.clear();
}

std::string rank_json(int pid) {
  std::string mine = serialize(rec().events, pid);
  // Names of the process/thread tracks, so Perfetto shows "rank 1 / main" and not pids.
  char meta[256];
  const int lanes = int(std::max<size_t>(1, rec().comm_lane_end.size()));
  for (int tid = kMain; tid < kComm + lanes; ++tid) {
    std::string name = tid == kMain ? "main" : "reductions in flight";
    if (tid > kComm) name += cat(" ", tid - kComm + 1);
    std::snprintf(meta, sizeof meta,
                  "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                  "\"args\":{\"name\":\"%s\"}},\n",
                  pid, tid, name.c_str());
    mine += meta;
  }
  std::snprintf(meta, sizeof meta,
                "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank "
                "%d\"}},\n",
                pid, pid);
  mine += meta;
  return mine;
}

size_t dropped() {
  return rec().dropped;
}

}  // namespace sieve::trace
