#include "comm/trace_gather.hpp"

#include <filesystem>
#include <fstream>
#include <vector>

#include "util/trace.hpp"

namespace sieve::trace {

void write_gathered(const Comm& comm, const std::string& path, const std::string& meta_json) {
  const std::string mine = rank_json(comm.rank());
  const int64_t dropped_events = comm.allreduce_sum(int64_t(dropped()));
  std::vector<char> all = comm.allgatherv(std::vector<char>(mine.begin(), mine.end()));
  std::string err;
  if (comm.is_root()) {
    const std::string tmp = path + ".tmp";
    std::ofstream f(tmp, std::ios::binary);
    f << "{\"displayTimeUnit\":\"ms\",\"otherData\":" << meta_json
      << ",\"droppedEvents\":" << dropped_events << ",\"traceEvents\":[\n";
    f.write(all.data(), std::streamsize(all.size()));
    // The last element of the list: a metadata event, so no trailing comma is left dangling.
    f << "{\"name\":\"trace_end\",\"ph\":\"M\",\"pid\":0,\"args\":{}}]}\n";
    f.close();
    std::error_code ec;
    if (!f)
      err = cat("cannot write trace file ", path);
    else
      std::filesystem::rename(tmp, path, ec);
    if (ec) err = cat("cannot rename the trace file into ", path, ": ", ec.message());
  }
  agree_on_error(comm, err);
}

}  // namespace sieve::trace
