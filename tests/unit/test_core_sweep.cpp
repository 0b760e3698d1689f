// Which sweep result belongs to which point of the current grid (config/sweep.hpp,
// issue 26 defect 2): the keys a result records, and why one of an earlier grid is stale.
#include <gtest/gtest.h>

#include "config/sweep.hpp"
#include "pipeline/schema.hpp"

using namespace sieve;

namespace {

Config load(std::vector<std::string> sets) {
  return Config::load(pipeline_schema(), "", sets);
}

}  // namespace

TEST(CoreSweep, ResultKeysAreTheScaledKeysThatChangeTheNumbers) {
  const Config c = load({"scaled.epochs=3", "scaled.sweep.arm=[full,filtered]"});
  const ResultKeys k = result_keys(c);
  EXPECT_EQ(k.at("scaled.epochs"), "3");
  EXPECT_EQ(k.at("scaled.arm"), "full");
  EXPECT_EQ(k.at("scaled.model.arch"), "resnet18");
  EXPECT_EQ(k.at("scaled.model.hidden"), "[256]");
  EXPECT_TRUE(k.count("scaled.optimizer.weight_decay"));
  // Not the grid, not how the run is checkpointed or evaluated in batches, no other section.
  EXPECT_FALSE(k.count("scaled.sweep"));
  EXPECT_FALSE(k.count("scaled.checkpoint.every_epochs"));
  EXPECT_FALSE(k.count("scaled.eval_batch"));
  EXPECT_FALSE(k.count("pretrain.epochs"));
  // The training seed derives from run.seed only while scaled.seed is 0.
  EXPECT_EQ(k.at("run.seed"), std::to_string(c.get_int("run.seed")));
  EXPECT_FALSE(result_keys(load({"scaled.seed=5"})).count("run.seed"));
}

TEST(CoreSweep, StaleReasonNamesTheDifferingKeysOrTheMissingIndex) {
  // The case: arms [full, filtered] at 1 epoch, then [full] at 3 epochs.
  const Config old_grid = load({"scaled.epochs=1", "scaled.sweep.arm=[full,filtered]"});
  const Config new_grid = load({"scaled.epochs=3", "scaled.sweep.arm=[full]"});
  const Sweep before(old_grid), after(new_grid);
  const ResultKeys run0_old = result_keys(before.apply(old_grid, 0));
  const ResultKeys run1_old = result_keys(before.apply(old_grid, 1));
  const ResultKeys run0_new = result_keys(after.apply(new_grid, 0));
  EXPECT_EQ(stale_reason(before, old_grid, 1, run1_old), "");
  EXPECT_EQ(stale_reason(after, new_grid, 0, run0_new), "");
  EXPECT_EQ(stale_reason(after, new_grid, 0, run0_old), "scaled.epochs 1 (grid: 3)");
  EXPECT_EQ(stale_reason(after, new_grid, 1, run1_old),
            "run 1 is outside the current grid (1 run)");
  // Same arm and epochs but another model: stale too.
  const Config mlp = load({"scaled.epochs=3", "scaled.sweep.arm=[full]", "scaled.model.arch=mlp"});
  EXPECT_EQ(stale_reason(after, new_grid, 0, result_keys(mlp)),
            "scaled.model.arch mlp (grid: resnet18)");
  // Numbers compare by value; keys a result does not record are not compared.
  EXPECT_EQ(result_mismatch({{"scaled.optimizer.weight_decay", "5e-4"}},
                            {{"scaled.optimizer.weight_decay", "0.0005"}, {"scaled.seed", "2"}}),
            "");
  EXPECT_EQ(result_mismatch({{"scaled.optimizer.weight_decay", "0.001"}},
                            {{"scaled.optimizer.weight_decay", "0.0005"}}),
            "scaled.optimizer.weight_decay 0.001 (grid: 0.0005)");
  EXPECT_EQ(result_mismatch({{"scaled.arm", "filtered"}}, {{"scaled.arm", "full"}}),
            "scaled.arm filtered (grid: full)");
}

TEST(CoreSweep, RecordedKeysComeFromResultJsonConfig) {
  const Json j = {{"arm", "full"}, {"config", {{"scaled.epochs", "2"}, {"scaled.arm", "full"}}}};
  const ResultKeys r = recorded_result_keys(j);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r.at("scaled.epochs"), "2");
  EXPECT_TRUE(recorded_result_keys(Json{{"arm", "full"}}).empty());
}
