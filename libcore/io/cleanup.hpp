// What a process leaves behind when it fails, is signalled or dies: only its own things.
//
// Temporaries. Every hidden temporary a Sieve program makes (AtomicOutput's
// `.NAME.tmp-PID-HOST`, write_text_atomic's, a report's directory moved aside, a stage lock)
// is registered here while it exists. SIGINT, SIGTERM and SIGHUP (Ctrl-C; what Slurm sends
// at the time limit) remove the registered paths and then end the process with the same
// signal (exit status 128 + N), unless a trainer has installed its own checkpoint-and-exit-75
// handler for SIGTERM (train/trainer.hpp), which stays as it was. The handler only writes the
// signal number to a pipe (async-signal-safe); a thread waiting on that pipe does the
// removal. A temporary of a process that died by SIGKILL or on another failure is an orphan:
// the next Sieve program writing into the same directory on the same host removes it
// (sweep_orphans) once that process is gone.
//
// Directories. Every directory a program creates goes through make_dirs, which records the
// ones this process made; after a failure the tool runner removes those that are still empty
// (deepest first), never one that another process made meanwhile.
#pragma once
#include <string>
#include <system_error>
#include <vector>

namespace sieve::cleanup {

// This host's name (gethostname, "" when unknown).
const std::string& host();
// "-PID-HOST": the suffix of this process's temporary names (after ".tmp" or ".old").
std::string tmp_suffix();

// Register / unregister a path to remove (recursively) when a stop signal ends the process.
void add(const std::string& path);
void forget(const std::string& path);
// Remove every registered path now (also run at exit, for a std::exit past the destructors).
void remove_registered();
// Install the SIGINT/SIGTERM/SIGHUP handlers (once per process; the tool runner calls it).
void install_signal_handlers();

// In `dir`, remove Sieve temporaries (".NAME.tmp-PID-HOST", "NAME.tmp-PID-HOST") of
// processes on this host that are no longer running; a report moved aside
// (".NAME.old-PID-HOST") goes back to NAME when NAME is missing, else it is removed. One log
// line per path. Rank-local; errors are ignored (a best effort).
void sweep_orphans(const std::string& dir);
// Whether process `pid` on this host is running (kill(pid, 0); a zombie is not).
bool pid_alive(long pid);
// Field `n` (1-based, as in proc(5): 3 = state, 22 = start time) of /proc/PID/stat, "" if
// unreadable.
std::string proc_stat_field(long pid, int n);

// create_directories that records each directory it made. Returns whether `path` is a
// directory afterwards; `ec` as for std::filesystem.
bool make_dirs(const std::string& path, std::error_code& ec);
// The directories this process made and did not yet remove, in creation order.
std::vector<std::string> made_dirs();
// Remove the directories this process made that are empty now, deepest first.
void remove_made_empty_dirs();

}  // namespace sieve::cleanup
