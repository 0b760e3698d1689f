#include "support/test_util.hpp"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "comm/comm.hpp"

namespace fs = std::filesystem;

namespace sieve::test {

static std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string scratch_dir(const std::string& name) {
  Comm world = Comm::world();
  // The rank count is part of the name: CTest runs the -n 2 and -n 3 variants of an MPI
  // test concurrently, and they must not share (and wipe) each other's directory.
  std::string dir = env_or("SIEVE_BUILD_DIR", ".") + "/test-scratch/" + name;
  if (world.size() > 1) dir += "-np" + std::to_string(world.size());
  // Likewise the forced-precision variants of a test (tests/CMakeLists.txt).
  if (const char* forced = std::getenv("SIEVE_PRECISION_AUTO"); forced && *forced)
    dir += std::string("-auto_") + forced;
  if (world.is_root()) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  world.barrier();
  return dir;
}

std::string shared_data(const std::string& file) {
  return env_or("SIEVE_SHARED_DATA", "../shared/data") + "/" + file;
}

std::string tool_path(const std::string& tool) {
  return env_or("SIEVE_BUILD_DIR", ".") + "/tools/" + tool;
}

int run_command(const std::string& cmd, std::string* output) {
  // Grouped, so that a redirection inside `cmd` (2>/dev/null: stdout only) keeps its meaning.
  std::string full = "{ " + cmd + "\n} 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf;
  std::string out;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int status = pclose(p);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string clean_mpi_env() {
  return "for v in $(env | grep -oE '^(PMIX_[A-Za-z0-9_]*|OMPI_MCA_ess|OMPI_MCA_pmix|"
         "OMPI_MCA_orte_[A-Za-z0-9_]*|ORTE_[A-Za-z0-9_]*|OMPI_APP_CTX_NUM_PROCS|OMPI_COMMAND)='); "
         "do unset ${v%=}; done; ";
}

std::string mpirun_prefix(int ranks) {
  return clean_mpi_env() + "mpirun --oversubscribe -n " + std::to_string(ranks) + " ";
}

}  // namespace sieve::test
