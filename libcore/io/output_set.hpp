// One writer per stage output, and a stage's files replaced as one unit.
//
// StageLock: `<dir>/.<name>.lock`, made with O_EXCL by rank 0 and holding "host pid start
// tool"; a second process that wants to write the same outputs is refused in one line naming
// the lock and the holder's host and pid, on every rank alike. A lock left by a process of
// this host that is gone (killed, or its pid now belongs to a younger process) is taken over
// with a log line; one of another host is never taken over (its process may be running).
// AtomicOutput takes one per output file unless the process already holds a stage lock
// whose directory contains it.
//
// OutputSet: the files one stage writes together (pretrain: metrics.jsonl, the early model and
// its JSON, the config sidecar, model.h5). A run writes them into `<dir>/.<stage>.staging/`
// and commit() moves them into place, model.h5 last, removing the members the new run did
// not produce: until then the previous set stays whole, and a failed, killed or signalled
// run leaves it as it was. Every file carries the run's id (`run_id` attribute; a random
// 64-bit number); readers that use several members refuse a mix (check_same_run). A resumed
// run continues the run of its checkpoint, and its staging directory with it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"

namespace sieve {

// Rank-local lock file (see above); throws Error when another live process holds it.
class LockFile {
 public:
  LockFile(std::string path, const std::string& what);
  ~LockFile();
  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_, dir_, mine_;  // mine_: what this process wrote into it
};

// Whether this process holds a stage lock on a directory that contains `path`.
bool lock_covers(const std::string& path);

// Collective: rank 0 takes `<dir>/.<name>.lock`; every rank throws the same CollectiveError
// when it is held.
class StageLock {
 public:
  StageLock(const Comm& comm, const std::string& dir, const std::string& name);

 private:
  std::unique_ptr<LockFile> file_;
};

class OutputSet {
 public:
  // Collective; takes the stage lock. `members`: file names in `dir`, committed in this
  // order (the one readers open first, model.h5, goes last).
  OutputSet(const Comm& comm, std::string stage, std::string dir, std::vector<std::string> members);
  ~OutputSet();  // a run that produced nothing leaves no staging directory
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  // Collective. Starts the staging directory: a new run (new id, empty staging) when
  // `resume_run_id` is "", else it continues that run (its staging directory, or a copy of
  // the committed set when that is the same run).
  void begin(const std::string& resume_run_id);
  const std::string& run_id() const { return run_id_; }
  // Where the run writes member `name` until commit().
  std::string staged(const std::string& name) const;
  // Collective: rank 0 moves every staged member into place (and removes the committed ones
  // the run did not produce); CollectiveError if an existing member is of another kind.
  void commit();

 private:
  const Comm& comm_;
  std::string stage_, dir_, staging_, run_id_;
  std::vector<std::string> members_;
  StageLock lock_;
  bool committed_ = false;
};

// The id of the run whose OutputSet this process began ("" if none): stamped into the HDF5
// files of the set and into checkpoints.
const std::string& current_run_id();
// The `run_id` attribute of a Sieve HDF5 file ("" when absent or unreadable).
std::string run_id_of(const std::string& path);
// Error naming the files when the existing ones among `paths` come from different runs.
void check_same_run(const std::vector<std::string>& paths);

}  // namespace sieve
