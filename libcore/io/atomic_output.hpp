// Outputs that appear complete or not at all, and that replace only their own kind.
//
// A stage writes to a hidden temporary name in the destination directory and renames it
// into place only after everything was written and closed: a crashed or killed stage never
// leaves a file that looks finished, and a previous good output stays intact until the new
// one is complete (rename is atomic within one file system).
//
// --overwrite replaces only a tool's own previous output, recognised by its kind
// (output_kind: the `schema` attribute of a Sieve HDF5 file, the report directory's
// contents, a train_scaled result.json), never a foreign file or directory and never an
// input of the same invocation. Checked up front (check_output_path) and again just before
// the rename (commit: the existing output must be of the same kind as the new one).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"

namespace sieve {

// Kinds of outputs that are not HDF5 files (the HDF5 ones are schema:: names).
namespace schema {
inline constexpr const char* kReport = "sieve.report/1";  // report directory
inline constexpr const char* kResult = "sieve.result/1";  // train_scaled result.json
inline constexpr const char* kLabelIssues = "sieve.label_issues/1";  // cluster_filter's CSV
}  // namespace schema

// What the existing `path` is: the `schema` attribute of a Sieve HDF5 file, schema::kReport
// for a directory holding only what report writes (index.html and report.config.yaml among
// it), schema::kResult for a JSON object with `sweep_index`, "" for anything else (including
// a missing path).
std::string output_kind(const std::string& path);
// The first columns of cluster_filter's label_issues.csv, by which output_kind knows it.
inline constexpr const char* kLabelIssuesHeader = "sample_id,given_label,suggested_label,";

class LockFile;  // io/output_set.hpp

class AtomicOutput {
 public:
  // Checks (on every rank, collectively) what check_output_path checks; picks the
  // temporary name. `kind`: what this output will be ("" = any Sieve output may be
  // replaced; commit() still requires the same kind as the new one). `inputs`: paths this
  // invocation reads, which the output must neither be nor contain.
  AtomicOutput(std::string final_path, bool overwrite, const Comm& comm, bool is_dir = false,
               std::string kind = "", std::vector<std::string> inputs = {});
  ~AtomicOutput();  // removes the temporary if commit() was not reached
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  const std::string& tmp_path() const { return tmp_; }
  const std::string& final_path() const { return final_; }
  // Barrier, then rank 0 checks that an existing final path is of the new output's kind and
  // renames the temporary onto it, then barrier. CollectiveError if it may not be replaced.
  void commit();

 private:
  std::string final_, tmp_, kind_;
  const Comm& comm_;
  std::unique_ptr<LockFile> lock_;  // rank 0: `.NAME.lock` beside the output
  bool is_dir_, committed_ = false;
};

// An error message with every temporary name of this process's outputs replaced by the
// output's own name ("out/.model.h5.tmp-123: write failed" -> "out/model.h5 (while writing
// it): write failed"): the user knows the final name, not the hidden one. The tool runner
// applies it to every error it prints.
std::string name_outputs_in(std::string message);
// Name `tmp` (a temporary file or directory) as `final_path` in those messages.
void name_output(const std::string& tmp, const std::string& final_path);

// Check an output path up front so that a stage fails before doing any work. Throws Error
// naming the path when: it exists without `overwrite`; it exists and is not a Sieve output
// of `kind` (any Sieve output when `kind` is ""); it is, or (a directory) contains, one of
// `inputs`; its directory is missing or not writable.
void check_output_path(const std::string& path, bool overwrite, const std::string& kind = "",
                       const std::vector<std::string>& inputs = {});

// Write a small text file atomically (rank-local; call on one rank).
void write_text_atomic(const std::string& path, const std::string& text);

// "out/model.h5" -> "out/model.config.yaml": the resolved config next to an output.
std::string config_sidecar_path(const std::string& output_path);

// cluster_filter's table beside its filter file: "run/filter.h5" -> "run/label_issues.csv",
// another name "x/f2.h5" -> "x/f2_label_issues.csv" (the report finds it the same way).
std::string label_issues_path(const std::string& filter_path);

// The resolved config next to an output (the sidecar) is an output too: it never replaces
// an input of the invocation (every --config file) nor a file Sieve did not write. Sieve's
// own begin with this line, which is how a previous one is recognised.
inline constexpr const char* kResolvedConfigMark = "# sieve resolved config";
// The --config files of this invocation (run_tool notes them once); no output may be one.
void note_config_inputs(const std::vector<std::string>& files);
// Up front, before any work: throws UsageError naming `path` when it is a --config file of
// this invocation, or exists and is not a resolved config written by Sieve.
void check_resolved_config_path(const std::string& path);
// check_resolved_config_path, then writes the mark line and `yaml` atomically (one rank).
void write_resolved_config(const std::string& path, const std::string& yaml);

}  // namespace sieve
