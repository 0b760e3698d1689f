// Writing the step timeline of every rank into one file (util/trace.hpp records it per
// rank). The gather lives here, beside Comm, so that util/ does not depend on comm/.
#pragma once
#include <string>

#include "comm/comm.hpp"

namespace sieve::trace {

// Collective: gathers every rank's events to rank 0, which writes the JSON file atomically
// (temporary name, then rename). `meta` lands in the file's "otherData". A failed write is
// raised on every rank (agree_on_error).
void write_gathered(const Comm& comm, const std::string& path, const std::string& meta_json = "{}");

}  // namespace sieve::trace
