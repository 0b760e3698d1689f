#include "io/atomic_output.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "io/cleanup.hpp"
#include "io/h5.hpp"
#include "io/output_set.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;

namespace sieve {

namespace {

// Everything report puts in its directory; a directory with anything else is not (only) a
// report, and is never replaced.
bool is_report_dir(const fs::path& p) {
  static const std::set<std::string> allowed = {
      "index.html", "index.md", "report.config.yaml", "tsne_interactive.html",
      "figures",    "data",     "gnuplot"};
  std::error_code ec;
  if (!fs::is_regular_file(p / "index.html", ec) || !fs::is_regular_file(p / "report.config.yaml", ec))
    return false;
  for (const auto& e : fs::directory_iterator(p, ec))
    if (!allowed.count(e.path().filename().string())) return false;
  return !ec;
}

std::string hdf5_schema(const fs::path& p) {
  try {
    h5::File f = h5::File::open(p.string());
    if (!f.has_attr("/", "schema")) return "";
    std::string s = f.attr_string("/", "schema");
    return s.rfind("sieve.", 0) == 0 ? s : "";
  } catch (const Error&) {
    return "";
  }
}

std::string json_kind(const fs::path& p) {
  std::error_code ec;
  if (fs::file_size(p, ec) > (1u << 20) || ec) return "";
  std::ifstream in(p);
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("sweep_index") ? schema::kResult : "";
}

// The first line of `path` (at most 200 bytes), "" when it cannot be read.
std::string first_line(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  std::getline(in, line);
  return line.substr(0, 200);
}

// cluster_filter's label_issues.csv, recognised by its header line.
std::string csv_kind(const fs::path& p) {
  return first_line(p).rfind(kLabelIssuesHeader, 0) == 0 ? schema::kLabelIssues : "";
}

std::string describe_kind(const std::string& k) {
  return k.empty() ? std::string("not a Sieve output") : cat("a '", k, "' output");
}

// The --config files of this invocation (note_config_inputs): set once by run_tool, before
// any output is checked.
std::vector<std::string> g_config_inputs;

// weakly_canonical, or the path as given if even that fails.
fs::path canon(const std::string& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(fs::absolute(p), ec);
  return ec ? fs::path(p) : c;
}

// `inner` equals `outer` or lies below it.
bool within(const fs::path& inner, const fs::path& outer) {
  auto [o, i] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  if (o == outer.end()) return true;
  // A trailing empty component ("dir/") still counts as equal.
  return std::next(o) == outer.end() && o->empty();
}

}  // namespace

std::string output_kind(const std::string& path) {
  std::error_code ec;
  fs::path p(path);
  auto st = fs::symlink_status(p, ec);
  if (ec || !fs::exists(st)) return "";
  if (fs::is_directory(st)) return is_report_dir(p) ? schema::kReport : "";
  if (!fs::is_regular_file(st)) return "";
  if (std::string k = hdf5_schema(p); !k.empty()) return k;
  if (std::string k = csv_kind(p); !k.empty()) return k;
  return json_kind(p);
}

void check_output_path(const std::string& path, bool overwrite, const std::string& kind,
                       const std::vector<std::string>& inputs) {
  if (path.empty()) throw UsageError("output path is empty");
  fs::path p(path);
  const fs::path out = canon(path);
  std::vector<std::string> all_inputs = inputs;
  all_inputs.insert(all_inputs.end(), g_config_inputs.begin(), g_config_inputs.end());
  for (const auto& in : all_inputs)
    if (!in.empty() && within(canon(in), out))
      throw UsageError(cat(path, ": output ", canon(in) == out ? "is" : "contains", " the input ",
                           in, " of this run (choose another output path)"));
  std::error_code ec;
  if (fs::exists(fs::symlink_status(p, ec))) {
    if (!overwrite) throw UsageError(cat(path, ": output exists (pass --overwrite to replace it)"));
    const std::string found = output_kind(path);
    if (found.empty() || (!kind.empty() && found != kind))
      throw UsageError(cat(path, ": exists and is ", describe_kind(found),
                           kind.empty() ? std::string() : cat(", not a '", kind, "' output"),
                           "; --overwrite replaces only this tool's own previous output"));
  }
  fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!fs::is_directory(dir)) throw Error(cat(path, ": output directory ", dir.string(), " does not exist"));
  if (access(dir.c_str(), W_OK) != 0)
    throw Error(cat(path, ": output directory ", dir.string(), " is not writable"));
}

namespace {
// Temporary -> final names, for the life of the process (an error is printed after the
// AtomicOutput that made it is gone).
std::mutex g_names_mutex;
std::vector<std::pair<std::string, std::string>> g_names;

}  // namespace

void name_output(const std::string& tmp, const std::string& final_path) {
  std::lock_guard<std::mutex> lock(g_names_mutex);
  g_names.emplace_back(tmp, final_path);
}

std::string name_outputs_in(std::string message) {
  std::lock_guard<std::mutex> lock(g_names_mutex);
  // Newest first: a temporary inside a staging directory (OutputSet) is named as the staged
  // file before the staging directory is named as the final one.
  for (auto it = g_names.rbegin(); it != g_names.rend(); ++it) {
    const auto& [tmp, final_path] = *it;
    // A file inside an output directory ("report/.tmp/x.png") is named inside the final one.
    for (size_t at = message.find(tmp); at != std::string::npos; at = message.find(tmp, at + 1)) {
      const bool inside = at + tmp.size() < message.size() && message[at + tmp.size()] == '/';
      message.replace(at, tmp.size(), inside ? final_path : final_path + " (while writing it)");
    }
  }
  return message;
}

AtomicOutput::AtomicOutput(std::string final_path, bool overwrite, const Comm& comm, bool is_dir,
                           std::string kind, std::vector<std::string> inputs)
    : final_(std::move(final_path)), kind_(std::move(kind)), comm_(comm), is_dir_(is_dir) {
  // Rank 0 checks and every rank gets its verdict, so that all ranks throw alike (the
  // same error everywhere: one line, no abort).
  std::string err;
  int code = 1;
  if (comm_.is_root()) {
    try {
      check_output_path(final_, overwrite, kind_, inputs);
      // One writer per output: a stage lock of this process may already cover it.
      if (!lock_covers(final_)) {
        fs::path p(final_);
        lock_ = std::make_unique<LockFile>(
            (p.parent_path() / cat(".", p.filename().string(), ".lock")).string(),
            cat("writer of ", p.filename().string()));
      }
    } catch (const Error& e) {
      err = e.what();
      code = e.exit_code();
    }
  }
  comm_.bcast_string(err);
  comm_.bcast(&code, 1);
  if (!err.empty()) {
    if (code == 2) throw UsageError(err);  // on every rank alike (run_tool prints it once)
    throw CollectiveError(err, code);
  }
  fs::path p(final_);
  std::string tmp;
  if (comm_.is_root()) {
    cleanup::sweep_orphans(p.parent_path().string());
    tmp = (p.parent_path() / cat(".", p.filename().string(), ".tmp", cleanup::tmp_suffix())).string();
    cleanup::add(tmp);  // removed on SIGINT/SIGTERM too
  }
  comm_.bcast_string(tmp);
  tmp_ = tmp;
  name_output(tmp_, final_);
  if (is_dir_ && comm_.is_root()) fs::create_directories(tmp_);
  comm_.barrier();
}

AtomicOutput::~AtomicOutput() {
  if (committed_ || !comm_.is_root()) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
  cleanup::forget(tmp_);
}

void AtomicOutput::commit() {
  comm_.barrier();
  std::string err;
  if (comm_.is_root()) {
    std::error_code ec;
    fs::path trash;
    if (fs::exists(fs::symlink_status(final_, ec))) {
      // The last word on --overwrite: the old output must be what this one is.
      const std::string was = output_kind(final_), now = output_kind(tmp_);
      if (was.empty() || was != now || (!kind_.empty() && was != kind_)) {
        err = cat(final_, ": not replaced: it is ", describe_kind(was), ", this tool wrote ",
                  describe_kind(now.empty() ? kind_ : now),
                  " (--overwrite replaces only this tool's own previous output)");
      } else if (is_dir_) {
        // A directory cannot be renamed over a non-empty one: move the old one aside first.
        fs::path p(final_);
        trash = p.parent_path() / cat(".", p.filename().string(), ".old", cleanup::tmp_suffix());
        cleanup::add(trash.string());  // a signal now: sweep_orphans restores it later
        fs::rename(final_, trash, ec);
        if (ec) err = cat(final_, ": cannot move the previous output aside: ", ec.message());
      }
    }
    if (err.empty()) {
      fs::rename(tmp_, final_, ec);
      if (ec) {
        err = cat(final_, ": cannot move the finished output into place: ", ec.message());
        if (!trash.empty()) fs::rename(trash, final_, ec);
      } else if (!trash.empty()) {
        fs::remove_all(trash, ec);
      }
      if (!trash.empty()) cleanup::forget(trash.string());
      if (err.empty()) cleanup::forget(tmp_);
    }
  }
  comm_.bcast_string(err);
  if (!err.empty()) throw CollectiveError(err);
  committed_ = true;
}

void write_text_atomic(const std::string& path, const std::string& text) {
  std::string tmp = cat(path, ".tmp", cleanup::tmp_suffix());
  cleanup::add(tmp);
  struct Forget {
    std::string p;
    ~Forget() { cleanup::forget(p); }
  } forget{tmp};
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error(cat(path, ": write failed (disk full or directory not writable?)"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(cat(path, ": cannot rename temporary file into place"));
  }
}

std::string config_sidecar_path(const std::string& output_path) {
  fs::path p(output_path);
  return (p.parent_path() / (p.stem().string() + ".config.yaml")).string();
}

std::string label_issues_path(const std::string& filter_path) {
  const fs::path p(filter_path);
  const std::string stem = p.stem().string();
  return (p.parent_path() /
          (stem == "filter" ? std::string("label_issues.csv") : stem + "_label_issues.csv"))
      .string();
}

void note_config_inputs(const std::vector<std::string>& files) { g_config_inputs = files; }

void check_resolved_config_path(const std::string& path) {
  const fs::path out = canon(path);
  for (const auto& in : g_config_inputs)
    if (canon(in) == out)
      throw UsageError(cat(path, ": the resolved config of this output goes there, but it is ",
                           "a --config file of this run (choose another output path)"));
  std::error_code ec;
  const auto st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st)) return;
  if (!fs::is_regular_file(st) || first_line(path).rfind(kResolvedConfigMark, 0) != 0)
    throw UsageError(cat(path, ": exists and is not a resolved config written by Sieve (no '",
                         kResolvedConfigMark, "' first line); the resolved config of this "
                         "output goes there: move the file away or choose another output path"));
}

void write_resolved_config(const std::string& path, const std::string& yaml) {
  check_resolved_config_path(path);  // again: the file may have appeared during the run
  write_text_atomic(path, cat(kResolvedConfigMark, " (written by Sieve next to its output; ",
                              "replaced by the next run)\n", yaml));
}

}  // namespace sieve
