#include "train/loss_auto.hpp"

#include <filesystem>

#include "io/atomic_output.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;

namespace sieve::train {

namespace {

std::string marker_path(const std::string& dir) {
  return (fs::path(dir) / "first_pass.json").string();
}

// Rank 0 reads the last JSON line of `path` (null when absent or empty); every rank gets it.
Json root_json_line(const Comm& comm, const std::string& path) {
  std::string text;
  if (comm.is_root() && fs::exists(path))
    if (const auto lines = read_json_lines(path); !lines.empty()) text = lines.back().dump();
  comm.bcast_string(text);
  return text.empty() ? Json() : Json::parse(text);
}

}  // namespace

std::string second_pass_dir(const std::string& ckpt_dir) {
  return (fs::path(ckpt_dir) / "second_pass").string();
}

Json read_first_pass(const Comm& comm, const std::string& dir, const std::string& run_id) {
  const Json j = root_json_line(comm, marker_path(dir));
  if (!j.is_object() || j.value("run_id", std::string()) != run_id) return Json();
  const auto v = j.find("first_pass");
  return v != j.end() && v->is_object() ? *v : Json();
}

void write_first_pass(const Comm& comm, const std::string& dir, const std::string& run_id,
                      const Json& verdict) {
  on_root_agreed(comm, [&] {
    write_text_atomic(marker_path(dir),
                      Json{{"run_id", run_id}, {"first_pass", verdict}}.dump() + "\n");
  });
}

std::string decided_loss(const Comm& comm, const std::string& info) {
  const Json j = root_json_line(comm, info);
  if (!j.is_object()) return "cross_entropy";
  const std::string loss = j.value("loss", std::string("cross_entropy"));
  SIEVE_CHECK(loss == "cross_entropy" || loss == "gce", info, ": field 'loss': expected ",
              "cross_entropy or gce, found ", loss);
  return loss;
}

}  // namespace sieve::train
