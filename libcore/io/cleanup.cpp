#include "io/cleanup.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include "util/error.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace sieve::cleanup {

namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::string> temporaries;
  std::vector<std::string> dirs;
  // A std::exit (exit_for_requeue) skips the stack's destructors: what is still registered
  // then (a stage lock) goes here.
  ~Registry() {
    std::lock_guard<std::mutex> lock(mu);
    std::error_code ec;
    for (const auto& p : temporaries) fs::remove_all(p, ec);
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

int g_pipe[2] = {-1, -1};

// The main thread is frozen while the temporaries are removed: otherwise it goes on writing
// and can make a removed directory again (report's `create_directories(tmp + "/gnuplot")`
// after the removal left `.report.tmp-*` behind in one CI run). The signal thread sends it
// kFreezeSignal; its handler acknowledges on g_ack and waits until the process ends. While a
// thread holds the registry's mutex the freeze is blocked, so it never waits on a frozen owner.
pthread_t g_main_thread;
int g_ack[2] = {-1, -1};
int freeze_signal() {
  return SIGRTMIN + 3;
}

extern "C" void on_freeze(int) {
  const int saved = errno;
  const unsigned char b = 1;
  if (write(g_ack[1], &b, 1) < 0) {
  }
  errno = saved;
  for (;;) pause();
}

// Blocks the freeze signal in this thread for a scope (while it holds the registry's mutex).
class FreezeBlocked {
 public:
  FreezeBlocked() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, freeze_signal());
    pthread_sigmask(SIG_BLOCK, &s, &old_);
  }
  ~FreezeBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

// Freezes the main thread (unless it is this one) and waits up to 2 s for it to say so.
void freeze_main_thread() {
  if (g_ack[0] < 0 || pthread_equal(pthread_self(), g_main_thread)) return;
  if (pthread_kill(g_main_thread, freeze_signal()) != 0) return;
  struct pollfd p {
    g_ack[0], POLLIN, 0
  };
  if (poll(&p, 1, 2000) == 1) {
    unsigned char b;
    if (read(g_ack[0], &b, 1) < 0) {
    }
  }
}

extern "C" void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  if (write(g_pipe[1], &b, 1) < 0) {
  }
  errno = saved;
}

// Waits for a signal number on the pipe, removes the temporaries and ends the process with
// that signal, so that the exit status is 128 + N as without a handler.
void signal_thread() {
  unsigned char b = 0;
  while (read(g_pipe[0], &b, 1) != 1) {
    if (errno != EINTR) return;
  }
  freeze_main_thread();
  remove_registered();
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  sigaction(b, &sa, nullptr);
  kill(getpid(), b);
}

}  // namespace

const std::string& host() {
  static const std::string h = [] {
    char buf[256] = {0};
    if (gethostname(buf, sizeof buf - 1) != 0) return std::string();
    return std::string(buf);
  }();
  return h;
}

std::string tmp_suffix() {
  return cat("-", getpid(), "-", host());
}

void add(const std::string& path) {
  Registry& r = registry();
  const FreezeBlocked no_freeze;
  std::lock_guard<std::mutex> lock(r.mu);
  r.temporaries.push_back(path);
}

void forget(const std::string& path) {
  Registry& r = registry();
  const FreezeBlocked no_freeze;
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = std::find(r.temporaries.begin(), r.temporaries.end(), path);
  if (it != r.temporaries.end()) r.temporaries.erase(it);
}

void remove_registered() {
  Registry& r = registry();
  const FreezeBlocked no_freeze;
  std::lock_guard<std::mutex> lock(r.mu);
  std::error_code ec;
  for (const auto& p : r.temporaries) fs::remove_all(p, ec);
  r.temporaries.clear();
}

void install_signal_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    registry();  // constructed first, so destroyed after anything that registers
    if (pipe2(g_pipe, O_CLOEXEC) != 0) return;  // not inherited by children (gnuplot)
    g_main_thread = pthread_self();             // run_tool calls this from the main thread
    if (pipe2(g_ack, O_CLOEXEC) == 0) {
      struct sigaction fz {};
      fz.sa_handler = on_freeze;
      sigemptyset(&fz.sa_mask);
      sigaction(freeze_signal(), &fz, nullptr);
    }
    std::thread(signal_thread).detach();
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    // A signal ignored by whoever started us stays ignored (nohup; a shell's background
    // job ignores SIGINT): only the default action, ending the process, becomes a clean-up.
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
      sigaction(sig, &sa, nullptr);
    }
  });
}

bool pid_alive(long pid) {
  if (pid <= 0 || (kill(pid_t(pid), 0) != 0 && errno != EPERM)) return false;
  // A zombie (killed, not yet reaped: mpirun has returned, init not yet collected it) is
  // gone as far as its files are concerned.
  return proc_stat_field(pid, 3) != "Z";
}

std::string proc_stat_field(long pid, int n) {
  std::ifstream in(cat("/proc/", pid, "/stat"));
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Field 2 is the command name in parentheses, which may hold spaces: count after it.
  const size_t close = s.rfind(')');
  if (close == std::string::npos || n < 3) return "";
  std::istringstream rest(s.substr(close + 1));
  std::string field;
  for (int i = 3; i <= n; ++i)
    if (!(rest >> field)) return "";
  return field;
}

void sweep_orphans(const std::string& dir) {
  if (host().empty()) return;
  static const std::regex re(R"(^(.*)\.(tmp|old)-([0-9]{1,9})-(.+)$)");
  std::error_code ec;
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir.empty() ? "." : dir, ec))
    entries.push_back(e.path());
  for (const auto& p : entries) {
    const std::string name = p.filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, re) || m[4].str() != host()) continue;
    const long pid = std::stol(m[3].str());
    if (pid == long(getpid()) || pid_alive(pid)) continue;
    std::string base = m[1].str();
    if (m[2].str() == "old" && base.size() > 1 && base[0] == '.') {
      // A previous output moved aside by a process that died before it put the new one in
      // place: the previous output is all there is, so it goes back.
      const fs::path final_path = p.parent_path() / base.substr(1);
      if (!fs::exists(fs::symlink_status(final_path, ec))) {
        fs::rename(p, final_path, ec);
        if (!ec)
          log::warn(cat(final_path.string(), ": restored from ", p.string(), " (left by process ",
                        pid, ", which is gone)"));
        continue;
      }
    }
    fs::remove_all(p, ec);
    if (!ec)
      log::warn(cat("removed ", p.string(), ": a temporary of process ", pid, " on ", host(),
                    ", which is gone"));
  }
}

bool make_dirs(const std::string& path, std::error_code& ec) {
  ec.clear();
  fs::path want = fs::absolute(path, ec);
  if (ec) return false;
  fs::path cur;
  for (const auto& part : want.lexically_normal()) {
    if (part.empty()) continue;
    cur /= part;
    if (fs::is_directory(cur, ec)) continue;
    ec.clear();
    if (fs::create_directory(cur, ec)) {
      Registry& r = registry();
      const FreezeBlocked no_freeze;
      std::lock_guard<std::mutex> lock(r.mu);
      r.dirs.push_back(cur.string());
    } else if (ec) {
      return false;
    }
  }
  return fs::is_directory(want, ec);
}

std::vector<std::string> made_dirs() {
  Registry& r = registry();
  const FreezeBlocked no_freeze;
  std::lock_guard<std::mutex> lock(r.mu);
  return r.dirs;
}

void remove_made_empty_dirs() {
  Registry& r = registry();
  const FreezeBlocked no_freeze;
  std::lock_guard<std::mutex> lock(r.mu);
  // Deepest first, so that a parent emptied by removing its children goes too.
  std::vector<std::string> dirs = r.dirs;
  std::stable_sort(dirs.begin(), dirs.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  std::vector<std::string> kept;
  for (const auto& d : dirs) {
    std::error_code ec;
    if (fs::is_directory(d, ec) && fs::is_empty(d, ec) && !ec && fs::remove(d, ec)) continue;
    kept.push_back(d);
  }
  r.dirs = kept;
}

}  // namespace sieve::cleanup
