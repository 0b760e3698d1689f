#include "train/grad_sync.hpp"

#include <algorithm>

#include "train/fusion_queue.hpp"
#include "train/param_server.hpp"
#include "train/reducer.hpp"

namespace sieve::train {

void check_comm_options(const CommOptions& o, const std::string& p) {
  if (o.strategy != "buckets" && o.strategy != "fusion-queue" && o.strategy != "parameter-server")
    throw UsageError(cat(p, ".comm.strategy '", o.strategy,
                         "': expected buckets, fusion-queue or parameter-server"));
  if (o.mode != "sync" && o.mode != "async")
    throw UsageError(cat(p, ".comm.mode '", o.mode, "': expected sync or async"));
  if (o.stale_compensation != "local-gradient" && o.stale_compensation != "momentum" &&
      o.stale_compensation != "none")
    throw UsageError(cat(p, ".comm.stale_compensation '", o.stale_compensation,
                         "': expected local-gradient, momentum or none"));
  if (o.mode == "async" && o.strategy != "parameter-server")
    throw UsageError(cat(p,
                         ".comm.mode async: only the parameter-server strategy has an "
                         "asynchronous (stale-synchronous) mode; ",
                         p, ".comm.strategy is ", o.strategy));
}

std::unique_ptr<GradSync> make_grad_sync(const CommOptions& o, const Comm& comm, float* grads,
                                         size_t total,
                                         const std::vector<std::pair<size_t, size_t>>& covered) {
  const size_t bytes = bucket_bytes(o);
  if (o.strategy == "fusion-queue")
    return std::make_unique<FusionQueue>(comm, grads, total, covered, o.cycle_ms,
                                         size_t(std::max(1.0, o.fusion_mb * 1048576.0)));
  if (o.strategy == "parameter-server")
    return std::make_unique<ParamServer>(
        comm, grads, total, covered, o.servers, bytes,
        o.mode == "async" ? std::max(0, o.max_staleness) : 0,
        o.stale_compensation == "local-gradient" ? ParamServer::Compensation::LocalGradient
        : o.stale_compensation == "momentum"     ? ParamServer::Compensation::Momentum
                                                 : ParamServer::Compensation::None);
  return std::make_unique<GradReducer>(comm, grads, total, covered, bytes);
}

size_t bucket_bytes(const CommOptions& o) {
  return size_t(std::max(1.0, o.bucket_mb * 1048576.0));
}

std::vector<size_t> bucket_cuts(size_t total, size_t bucket_bytes) {
  return even_cuts(total, std::max<size_t>(1024, bucket_bytes / sizeof(float)));
}

}  // namespace sieve::train
