// Shared by the dataset-reader fuzz targets (fuzz_data_*.cpp): the readers take paths, so
// each input becomes a set of files in a per-process scratch directory, the source is opened
// and every row of both splits is read through the Source interface.
//
// Input layout: byte 0 holds option flags (target-specific), the rest is split into files at
// each occurrence of kSep (so libFuzzer's insert/erase mutations move file boundaries
// naturally). Missing sections mean missing files.
#pragma once
#include <mpi.h>
#include <sanitizer/lsan_interface.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "comm/comm.hpp"
#include "data/source.hpp"

// LeakSanitizer options for the targets that start MPI (each target is one translation unit,
// so this is defined once per binary). OpenMPI dlopens and dlcloses its components: scanning
// their stale dynamic TLS crashes LSan's tracer ("Tracer caught signal 11", DTLS), so TLS is
// not scanned as a root; the readers keep nothing in thread-local storage.
extern "C" const char* __lsan_default_options() { return "use_tls=0"; }
// The fuzz build compiles with recoverable UBSan checks: make a report fatal, so that
// libFuzzer records the input as a crash instead of printing and going on.
extern "C" const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1"; }
// OpenMPI's own threads allocate process-lifetime state too (as tests/support/lsan.supp).
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libmpi.so\nleak:libopen-pal.so\nleak:libopen-rte.so\nleak:libhwloc.so\n"
         "leak:libpmix.so\nleak:libevent\nleak:mca_\n";
}

namespace sieve::fuzz {

inline constexpr std::string_view kSep = "@@@@";

// A one-rank world: the readers agree on errors through MPI collectives (no-ops at size 1).
// OpenMPI's initialisation allocates process-lifetime state it never frees (and the fuzzer
// never calls MPI_Finalize); LeakSanitizer ignores what is allocated while it is disabled,
// so only leaks made while reading inputs are reported.
inline const Comm& world() {
  static const Comm comm = [] {
    __lsan::ScopedDisabler no_leak_check;
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    return Comm::world();
  }();
  return comm;
}

// An empty per-process directory (wiped for every input).
inline std::string fresh_dir(const std::string& tag) {
  static const std::string dir =
      (std::filesystem::temp_directory_path() / ("sieve-fuzz-" + tag + "-" + std::to_string(getpid())))
          .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// SIEVE_FUZZ_VERBOSE=1: print each input's outcome (for triage and for checking that the
// valid seeds really are read to the end).
inline void outcome(const char* what) {
  static const bool verbose = std::getenv("SIEVE_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "fuzz outcome: %s\n", what);
}

inline std::vector<std::string_view> split_sections(std::string_view body) {
  std::vector<std::string_view> out;
  while (true) {
    size_t p = body.find(kSep);
    out.push_back(body.substr(0, p));
    if (p == std::string_view::npos) break;
    body.remove_prefix(p + kSep.size());
  }
  return out;
}

inline void write_file(const std::string& path, std::string_view bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();  // the scratch directory must be writable: a harness failure
  if (!bytes.empty()) std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

// Read every row of both splits in batches (as the writer would), checking that the meta
// data is self-consistent and that the labels produced are within the classes declared.
inline void read_everything(const data::Source& src) {
  const data::DatasetMeta& m = src.meta();
  if (m.n[0] < 0 || m.n[1] < 0 || m.row_elems() < 0 || m.num_classes != int64_t(m.class_names.size()))
    __builtin_trap();
  const int64_t batch = 7;  // odd, so batches straddle CIFAR batch files
  const int64_t elems = m.row_elems();
  std::vector<uint8_t> images(m.kind == data::Kind::Image ? size_t(batch * elems) : 0);
  std::vector<float> features(m.kind == data::Kind::Tabular ? size_t(batch * elems) : 0);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  std::vector<uint8_t> noise(static_cast<size_t>(batch));
  for (data::Split s : data::kSplits) {
    for (int64_t r = 0; r < m.rows(s); r += batch) {
      int64_t n = std::min(batch, m.rows(s) - r);
      data::Rows out;
      out.images = images.empty() ? nullptr : images.data();
      out.features = features.empty() ? nullptr : features.data();
      out.labels = labels.data();
      out.noise = m.has_noise ? noise.data() : nullptr;
      src.produce(s, r, n, out);
      for (int64_t i = 0; i < n; ++i)
        if (labels[size_t(i)] < 0 || labels[size_t(i)] >= m.num_classes) __builtin_trap();
      // The readers reject non-finite numbers, so every float32 feature must be finite.
      for (int64_t i = 0; i < (features.empty() ? 0 : n * elems); ++i)
        if (!std::isfinite(features[size_t(i)])) __builtin_trap();
    }
  }
  auto mean = src.exact_mean();
  auto sd = src.exact_std();
  if (!mean.empty() && (int64_t(mean.size()) != m.features || sd.size() != mean.size()))
    __builtin_trap();
}

}  // namespace sieve::fuzz
