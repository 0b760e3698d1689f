// What a failed or overlapping process may remove or take (io/cleanup.hpp, io/output_set.hpp).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "io/cleanup.hpp"
#include "io/output_set.hpp"
#include "support/test_util.hpp"

using namespace sieve;
namespace fs = std::filesystem;

namespace {
// A pid of this host that is not running: a child that has exited and been reaped.
long dead_pid() {
  pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, nullptr, 0);
  return long(p);
}
}  // namespace

TEST(Cleanup, RemovesOnlyTheEmptyDirectoriesThisProcessMade) {
  const std::string dir = test::scratch_dir("cleanup_made_dirs");
  std::error_code ec;
  ASSERT_TRUE(cleanup::make_dirs(dir + "/run/pretrain/checkpoints", ec)) << ec.message();
  ASSERT_TRUE(cleanup::make_dirs(dir + "/run/sweep/run-0", ec)) << ec.message();
  // Made meanwhile by another process (as far as this process knows): never removed.
  fs::create_directories(dir + "/run/notes");
  fs::create_directories(dir + "/run/sweep/run-4/checkpoints");
  fs::create_directories(dir + "/run/pretrain/other");  // keeps our pretrain/ non-empty
  cleanup::remove_made_empty_dirs();
  EXPECT_TRUE(fs::is_directory(dir + "/run/notes"));
  EXPECT_TRUE(fs::is_directory(dir + "/run/sweep/run-4/checkpoints"));
  EXPECT_TRUE(fs::is_directory(dir + "/run/pretrain/other"));
  EXPECT_FALSE(fs::exists(dir + "/run/pretrain/checkpoints"));  // ours, empty
  EXPECT_FALSE(fs::exists(dir + "/run/sweep/run-0"));            // ours, empty
  EXPECT_TRUE(fs::is_directory(dir + "/run/sweep"));  // ours, but holds another's run-4
  // The scratch directory existed before: not made here, not recorded.
  for (const auto& d : cleanup::made_dirs()) EXPECT_NE(d, dir);
}

TEST(Lock, SecondWriterRefusedStaleTakenOverForeignHostKept) {
  const std::string dir = test::scratch_dir("cleanup_lock");
  const std::string path = dir + "/.pretrain.lock";
  {
    LockFile held(path, "pretrain");
    try {
      LockFile again(path, "pretrain");
      ADD_FAILURE() << "a second lock was taken";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(path), std::string::npos) << m;
      EXPECT_NE(m.find(cat("pid ", getpid(), " on host ", cleanup::host())), std::string::npos) << m;
    }
    EXPECT_TRUE(lock_covers(dir + "/checkpoints/ckpt-1.h5"));
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(lock_covers(dir + "/checkpoints/ckpt-1.h5"));

  // A dead pid of this host: taken over. The same pid on another host: refused.
  std::ofstream(path) << "host=" << cleanup::host() << " pid=" << dead_pid() << " tool=pretrain\n";
  EXPECT_NO_THROW(LockFile(path, "pretrain"));
  std::ofstream(path) << "host=elsewhere.invalid pid=" << dead_pid() << " tool=pretrain\n";
  EXPECT_THROW(LockFile(path, "pretrain"), Error);
  // Our own pid with another start time: a reused pid, so the holder is gone.
  std::ofstream(path) << "host=" << cleanup::host() << " pid=" << getpid() << " ticks=1 tool=x\n";
  EXPECT_NO_THROW(LockFile(path, "pretrain"));

  // Another host's lock of an earlier run of this Slurm job (requeued after its node died):
  // taken over; one of the same run of the job (a concurrent step) is not.
  setenv("SLURM_JOB_ID", "77", 1);
  setenv("SLURM_RESTART_COUNT", "1", 1);
  std::ofstream(path) << "host=elsewhere.invalid pid=1 job=77 restart=0 tool=pretrain\n";
  EXPECT_NO_THROW(LockFile(path, "pretrain"));
  std::ofstream(path) << "host=elsewhere.invalid pid=1 job=77 restart=1 tool=pretrain\n";
  EXPECT_THROW(LockFile(path, "pretrain"), Error);
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_RESTART_COUNT");
  fs::remove(path);
}
