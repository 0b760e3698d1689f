// run_process (util/process.hpp): children started from an argument vector, never through a
// shell, so paths with quotes, $( ) and non-ASCII letters are passed through as bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/atomic_output.hpp"
#include "support/test_util.hpp"
#include "util/error.hpp"
#include "util/process.hpp"

using namespace sieve;
namespace fs = std::filesystem;

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST(Process, OddPathsAreArgumentsNotShellText) {
  const std::string base = test::scratch_dir("process_odd");
  const std::string odd = base + "/dir 'q' $(touch PWNED) é";
  fs::create_directories(odd);
  const std::string log = odd + "/out 'log'.txt";
  // The child prints its working directory and its argument: both must be the bytes given.
  EXPECT_EQ(run_process({"sh", "-c", "pwd; printf '%s\\n' \"$0\"", odd + "/x`id`"}, {odd, log}), 0);
  EXPECT_EQ(slurp(log), fs::canonical(odd).string() + "\n" + odd + "/x`id`\n");
  EXPECT_FALSE(fs::exists(base + "/PWNED"));
  EXPECT_FALSE(fs::exists(odd + "/PWNED"));
  EXPECT_FALSE(fs::exists("PWNED"));
}

TEST(Process, ExitCodesNotFoundAndStderr) {
  const std::string dir = test::scratch_dir("process_codes");
  const std::string log = dir + "/log";
  EXPECT_EQ(run_process({"sh", "-c", "echo oops >&2; exit 3"}, {"", log}), 3);
  EXPECT_EQ(slurp(log), "oops\n");  // stderr goes to the output file too
  EXPECT_EQ(run_process({"sieve-no-such-program-xyz"}, {"", log}), 127);
  EXPECT_EQ(run_process({"sh", "-c", "kill -9 $$"}), 128 + 9);
  EXPECT_THROW(run_process({"true"}, {dir + "/missing", ""}), Error);
  EXPECT_THROW(run_process({"true"}, {"", dir + "/missing/log"}), Error);
}

// The resolved config next to an output (io/atomic_output.hpp) replaces only its own kind.
TEST(ResolvedConfig, ReplacesOnlyItsOwnAndNeverAConfigInput) {
  const std::string dir = test::scratch_dir("resolved_config");
  const std::string mine = dir + "/a.config.yaml", user = dir + "/b.config.yaml";
  write_resolved_config(mine, "x: 1\n");
  EXPECT_EQ(slurp(mine).rfind(kResolvedConfigMark, 0), 0u);
  EXPECT_NE(slurp(mine).find("\nx: 1\n"), std::string::npos);
  write_resolved_config(mine, "x: 2\n");  // its own previous one: replaced
  EXPECT_NE(slurp(mine).find("\nx: 2\n"), std::string::npos);
  {
    std::ofstream(user) << "# my notes\nx: 3\n";
  }
  EXPECT_THROW(check_resolved_config_path(user), UsageError);
  EXPECT_THROW(write_resolved_config(user, "x: 4\n"), UsageError);
  EXPECT_EQ(slurp(user), "# my notes\nx: 3\n");
  note_config_inputs({mine});  // now an input of "this run": never replaced
  EXPECT_THROW(write_resolved_config(mine, "x: 5\n"), UsageError);
  EXPECT_THROW(check_output_path(mine, true), UsageError);
  note_config_inputs({});
  EXPECT_NO_THROW(check_resolved_config_path(dir + "/new.config.yaml"));
}
