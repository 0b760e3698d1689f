// Lineage between files: which dataset a derived file was made from (docs/formats.md,
// "Lineage").
//
// A dataset's `fingerprint` is a 128-bit content hash of every row of both splits (image
// bytes or features, label, sample_id) at its position. It is a sum of per-row hashes, so
// it does not depend on how the rows were split over ranks, threads or shard files (a
// re-shard of the same data keeps it), and it changes when any row's content or position
// does (another shuffle seed, another source, a relabelled row). Not a cryptographic hash:
// it catches mistakes, not forgeries.
//
// A derived file (model, features, embedding, filter) carries `dataset_fingerprint` (the
// dataset at the root of its inputs), `inputs` ("<path> <fingerprint>" per input file) and
// its own `fingerprint`, a hash of its schema, resolved config and its inputs'
// fingerprints. Every reader that joins a derived file with a dataset by sample_id checks
// that the two fingerprints agree (require_same_dataset).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/h5.hpp"

namespace sieve::lineage {

inline constexpr const char* kFingerprint = "fingerprint";
inline constexpr const char* kDatasetFingerprint = "dataset_fingerprint";
inline constexpr const char* kInputs = "inputs";

// A fast 64-bit hash of a byte range (four multiply-xorshift lanes, ~10 GB/s).
uint64_t hash_bytes(const void* data, size_t n, uint64_t seed);

// The order-independent accumulator of a content fingerprint.
struct Fingerprint {
  uint64_t lo = 0, hi = 0;
  // One row: `row_hash` must already include the row's position.
  void add_row(uint64_t row_hash);
  void add(const Fingerprint& o) {
    lo += o.lo;
    hi += o.hi;
  }
  std::string hex() const;  // 32 lower-case hex digits
};

struct Input {
  std::string path;
  std::string fingerprint;  // "" for a file without one (hand-made or older)
};

// The file's own fingerprint attribute ("" when it has none).
std::string fingerprint_of(const h5::File& f);
// The dataset a file belongs to: a dataset's own fingerprint, a derived file's
// `dataset_fingerprint` ("" when it has neither).
std::string dataset_fingerprint_of(const h5::File& f);
// What a derived file was made from.
struct Lineage {
  std::vector<Input> inputs;
  std::string dataset_fingerprint;  // the dataset at the root of the inputs
  // Tells apart outputs of one derivation (pretrain's early and final models).
  std::string variant;
};

// What a file made from `path` inherits (the file opened once): `path` with its
// fingerprint as the one input, and the dataset `path` belongs to.
Lineage lineage_of(const std::string& path);

// Writes `inputs`, `dataset_fingerprint` and the derived `fingerprint` onto `out`.
void stamp_derived(h5::File& out, const std::string& schema, const std::string& config_yaml,
                   const Lineage& from);
// The fingerprint stamp_derived gives (for files that are not HDF5, e.g. result.json).
std::string derived_fingerprint(const std::string& schema, const std::string& config_yaml,
                                const std::vector<Input>& inputs, const std::string& variant = "");

// Throws an Error naming both files when `derived_fp` (the dataset_fingerprint recorded in
// `derived_path`) is not `dataset_fp` (the fingerprint of `dataset_path`). A dataset without
// a fingerprint (written by hand, e.g. with h5py) is not checked; a derived file without
// one, joined with a dataset that has one, is refused (made by an older Sieve: re-run it).
void require_same_dataset(const std::string& derived_path, const std::string& derived_fp,
                          const std::string& dataset_path, const std::string& dataset_fp);
void require_same_dataset(const h5::File& derived, const h5::File& dataset);

}  // namespace sieve::lineage
