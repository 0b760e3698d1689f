#include "io/output_set.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "io/atomic_output.hpp"
#include "io/cleanup.hpp"
#include "io/h5.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace sieve {

namespace {

std::mutex g_mu;
std::vector<std::string> g_locked_dirs;  // directories of the stage locks this process holds
std::string g_run_id;

// The process's start time in clock ticks since boot. With the pid it names one process, so
// a pid reused by a younger process is not the lock's holder.
std::string start_ticks(long pid) {
  return cleanup::proc_stat_field(pid, 22);
}

std::map<std::string, std::string> parse_lock(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::istringstream in(text);
  std::string word;
  while (in >> word)
    if (auto eq = word.find('='); eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
  return kv;
}

std::string read_small(const std::string& path) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s.substr(0, 4096);
}

// "job=J restart=R " under Slurm, "" elsewhere: a requeued job keeps its id and counts up
// SLURM_RESTART_COUNT, and may start on another node than the one that died holding the lock.
std::string slurm_text() {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job || !*job) return "";
  const char* restart = std::getenv("SLURM_RESTART_COUNT");
  return cat("job=", job, " restart=", restart && *restart ? restart : "0", " ");
}

std::string now_text() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// Why the lock's holder is gone ("" when it may be running).
std::string stale_reason(const std::map<std::string, std::string>& kv, const std::string& path) {
  auto get = [&](const char* k) { return kv.count(k) ? kv.at(k) : std::string(); };
  if (get("host").empty() || get("pid").empty()) {
    // Torn (a process killed between creating and writing it), or being written this very
    // moment: only an old one is stale.
    std::error_code ec;
    auto age = fs::file_time_type::clock::now() - fs::last_write_time(path, ec);
    return !ec && age > std::chrono::seconds(30) ? "an unreadable lock older than 30 s" : "";
  }
  if (get("host") != cleanup::host()) {
    // Another host's process cannot be checked, except an earlier run of this very Slurm job:
    // Slurm requeued it, so it has ended (and its node may be gone).
    const auto me = parse_lock(slurm_text());
    if (!get("job").empty() && me.count("job") && me.at("job") == get("job") &&
        std::atol(get("restart").c_str()) < std::atol(me.at("restart").c_str()))
      return cat("an earlier run of Slurm job ", get("job"), ", since requeued");
    return "";
  }
  const long pid = std::atol(get("pid").c_str());
  if (!cleanup::pid_alive(pid)) return cat("process ", pid, " is gone");
  if (!get("ticks").empty() && start_ticks(pid) != get("ticks"))
    return cat("pid ", pid, " now belongs to another process");
  return "";
}

}  // namespace

LockFile::LockFile(std::string path, const std::string& what)
    : path_(std::move(path)), dir_(fs::path(path_).parent_path().string()) {
  mine_ = cat("host=", cleanup::host(), " pid=", getpid(), " ticks=", start_ticks(getpid()), " ",
               slurm_text(), "start=", now_text(), " tool=", what, "\n");
  const std::string& mine = mine_;
  for (int attempt = 0; attempt < 3; ++attempt) {
    int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      const bool ok = write(fd, mine.data(), mine.size()) == ssize_t(mine.size());
      close(fd);
      if (!ok) {
        unlink(path_.c_str());
        throw Error(cat(path_, ": cannot write the lock file (disk full?)"));
      }
      cleanup::add(path_);
      std::lock_guard<std::mutex> lock(g_mu);
      g_locked_dirs.push_back(dir_.empty() ? "." : dir_);
      return;
    }
    if (errno != EEXIST) throw Error(cat(path_, ": cannot create the lock file: ", std::strerror(errno)));
    std::string held = read_small(path_);
    auto kv = parse_lock(held);
    std::string why = stale_reason(kv, path_);
    // A holder of this host may be in its last moments (SIGKILLed by mpirun a moment before
    // a requeued job starts): give it a second to be gone.
    for (int i = 0; i < 10 && why.empty() && kv["host"] == cleanup::host(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!fs::exists(path_)) break;
      held = read_small(path_);
      kv = parse_lock(held);
      why = stale_reason(kv, path_);
    }
    if (!fs::exists(path_)) continue;
    if (why.empty()) {
      auto get = [&](const char* k) { return kv.count(k) ? kv.at(k) : std::string("?"); };
      throw Error(cat(path_, ": another run writes these outputs: ", get("tool"), " pid ",
                      get("pid"), " on host ", get("host"), " since ", get("start"),
                      " (wait for it to end; remove the lock only if that process is gone)"));
    }
    // Take over: move the stale lock to a private name first, so that of two processes
    // taking it over at once only one removes it (the other's rename finds nothing).
    const std::string aside = path_ + ".stale" + cleanup::tmp_suffix();
    if (rename(path_.c_str(), aside.c_str()) == 0) {
      if (read_small(aside) == held) {
        unlink(aside.c_str());
        log::warn(cat(path_, ": taking over a stale lock (", why, ")"));
      } else {
        // Someone else's fresh lock: put it back (link fails if yet another one exists).
        if (link(aside.c_str(), path_.c_str()) != 0) {
        }
        unlink(aside.c_str());
      }
    }
  }
  throw Error(cat(path_, ": cannot take the lock (other processes keep taking it)"));
}

LockFile::~LockFile() {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = std::find(g_locked_dirs.begin(), g_locked_dirs.end(), dir_.empty() ? "." : dir_);
    if (it != g_locked_dirs.end()) g_locked_dirs.erase(it);
  }
  // Only our own lock: after a takeover by another process (ours looked stale) it is theirs.
  if (read_small(path_) == mine_) unlink(path_.c_str());
  cleanup::forget(path_);
}

bool lock_covers(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  std::lock_guard<std::mutex> lock(g_mu);
  for (const auto& d : g_locked_dirs) {
    const fs::path base = fs::weakly_canonical(fs::absolute(d, ec), ec);
    auto [b, q] = std::mismatch(base.begin(), base.end(), p.begin(), p.end());
    if (b == base.end() && q != p.end()) return true;
  }
  return false;
}

StageLock::StageLock(const Comm& comm, const std::string& dir, const std::string& name) {
  std::string err;
  if (comm.is_root()) {
    try {
      file_ = std::make_unique<LockFile>((fs::path(dir.empty() ? "." : dir) / cat(".", name, ".lock")).string(), name);
      // The stage's directory is ours now: temporaries that a killed run of it left go.
      cleanup::sweep_orphans(dir.empty() ? "." : dir);
    } catch (const Error& e) {
      err = e.what();
    }
  }
  comm.bcast_string(err);
  if (!err.empty()) throw CollectiveError(err);
}

OutputSet::OutputSet(const Comm& comm, std::string stage, std::string dir,
                     std::vector<std::string> members)
    : comm_(comm),
      stage_(std::move(stage)),
      dir_(std::move(dir)),
      staging_((fs::path(dir_) / cat(".", stage_, ".staging")).string()),
      members_(std::move(members)),
      lock_(comm_, dir_, stage_) {
  name_output(staging_, dir_);  // errors name the final files, not the staged ones
}

OutputSet::~OutputSet() {
  if (committed_ || !comm_.is_root() || run_id_.empty()) return;
  // A run that failed before writing anything leaves no staging directory behind; one with
  // partial outputs keeps it for --resume (a new run starts it afresh).
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(staging_, ec))
    if (e.path().filename() != "run_id" && fs::file_size(e.path(), ec) > 0) return;
  fs::remove_all(staging_, ec);
}

std::string OutputSet::staged(const std::string& name) const {
  return (fs::path(staging_) / name).string();
}

void OutputSet::begin(const std::string& resume_run_id) {
  on_root_agreed(comm_, [&] {
    std::error_code ec;
    const std::string id_file = staged("run_id");
    const std::string staged_id = fs::exists(id_file, ec) ? read_small(id_file) : "";
    if (!resume_run_id.empty() && staged_id == resume_run_id) {
      run_id_ = resume_run_id;
      return;
    }
    fs::remove_all(staging_, ec);  // an earlier, unfinished run of this stage
    if (!cleanup::make_dirs(staging_, ec))
      throw Error(cat(staging_, ": cannot create the staging directory: ", ec.message()));
    run_id_ = resume_run_id;
    if (run_id_.empty()) {
      std::random_device rd;
      std::mt19937_64 g((uint64_t(rd()) << 32) ^ rd() ^ uint64_t(getpid()) ^
                        uint64_t(std::chrono::system_clock::now().time_since_epoch().count()));
      char buf[17];
      std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(g()));
      run_id_ = buf;
    } else if (std::any_of(members_.begin(), members_.end(), [&](const std::string& m) {
                 return run_id_of((fs::path(dir_) / m).string()) == run_id_;
               })) {
      // Resuming the committed run (it finished; more epochs or a repeat): it continues from
      // its own set.
      for (const auto& m : members_)
        if (fs::exists(fs::path(dir_) / m, ec)) fs::copy_file(fs::path(dir_) / m, staged(m), ec);
    }
    write_text_atomic(id_file, run_id_);
  });
  std::string id = run_id_;
  comm_.bcast_string(id);
  run_id_ = id;
  std::lock_guard<std::mutex> lock(g_mu);
  g_run_id = run_id_;
}

void OutputSet::commit() {
  comm_.barrier();
  on_root_agreed(comm_, [&] {
    std::error_code ec;
    for (const auto& m : members_) {
      const fs::path fin = fs::path(dir_) / m;
      const std::string now = output_kind(staged(m)), was = output_kind(fin.string());
      if (!now.empty() && fs::exists(fs::symlink_status(fin, ec)) && was != now)
        throw Error(cat(fin.string(), ": not replaced: it is ",
                        was.empty() ? std::string("not a Sieve output") : cat("a '", was, "' output"),
                        ", this run wrote a '", now, "' output"));
    }
    for (const auto& m : members_) {
      const fs::path fin = fs::path(dir_) / m;
      if (fs::exists(staged(m), ec)) {
        fs::rename(staged(m), fin, ec);
        if (ec) throw Error(cat(fin.string(), ": cannot move the finished output into place: ", ec.message()));
      } else {
        fs::remove(fin, ec);  // the previous run's, which this run did not produce
      }
    }
    fs::remove_all(staging_, ec);
  });
  committed_ = true;
}

const std::string& current_run_id() {
  return g_run_id;
}

std::string run_id_of(const std::string& path) {
  try {
    h5::File f = h5::File::open(path);
    return f.has_attr("/", "run_id") ? f.attr_string("/", "run_id") : "";
  } catch (const Error&) {
    return "";
  }
}

void check_same_run(const std::vector<std::string>& paths) {
  std::string first, first_id;
  for (const auto& p : paths) {
    std::error_code ec;
    if (!fs::exists(p, ec)) continue;
    const std::string id = run_id_of(p);
    if (first.empty()) {
      first = p;
      first_id = id;
    } else if (id != first_id) {
      throw Error(cat(p, " (run ", id.empty() ? "unknown" : id, ") and ", first, " (run ",
                      first_id.empty() ? "unknown" : first_id,
                      ") come from different runs: the outputs are mixed (an interrupted or "
                      "concurrent run); run the stage that writes them again"));
    }
  }
}

}  // namespace sieve
