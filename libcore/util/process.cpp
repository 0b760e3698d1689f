#include "util/process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.hpp"

extern char** environ;

namespace sieve {

namespace {

// posix_spawn_file_actions_t with its destroy call tied to scope.
struct FileActions {
  posix_spawn_file_actions_t fa;
  FileActions() { posix_spawn_file_actions_init(&fa); }
  ~FileActions() { posix_spawn_file_actions_destroy(&fa); }
};

}  // namespace

int run_process(const std::vector<std::string>& argv, const ProcessOptions& opt) {
  SIEVE_ASSERT(!argv.empty() && !argv[0].empty(), "run_process: empty argv");
  // The file actions' own failures show up only as the child's exit 127, so the paths are
  // checked here first to name the right one in the error.
  if (!opt.cwd.empty()) {
    struct stat st;
    SIEVE_CHECK(::stat(opt.cwd.c_str(), &st) == 0 && S_ISDIR(st.st_mode), opt.cwd,
                ": not a directory (working directory for ", argv[0], ")");
  }
  if (!opt.output_file.empty()) {
    const int fd = ::open(opt.output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    SIEVE_CHECK(fd >= 0, opt.output_file, ": cannot open for writing (", std::strerror(errno),
                ")");
    ::close(fd);
  }
  FileActions a;
  posix_spawn_file_actions_addopen(&a.fa, 0, "/dev/null", O_RDONLY, 0);
  // The output file is opened before the change of directory: a relative name means the
  // same file to the caller and to the child.
  if (!opt.output_file.empty()) {
    posix_spawn_file_actions_addopen(&a.fa, 1, opt.output_file.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&a.fa, 1, 2);
  }
  if (!opt.cwd.empty()) posix_spawn_file_actions_addchdir_np(&a.fa, opt.cwd.c_str());
  std::vector<char*> args;
  for (const auto& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &a.fa, nullptr, args.data(), environ);
  if (rc != 0) return 127;  // not found, not executable: what a shell reports as 127
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw Error(cat(argv[0], ": waitpid failed (", std::strerror(errno), ")"));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 128;
}

}  // namespace sieve
