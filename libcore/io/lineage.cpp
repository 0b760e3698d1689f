#include "io/lineage.hpp"

#include <cstdio>
#include <cstring>

#include "io/schemas.hpp"
#include "util/error.hpp"
#include "util/hash.hpp"

namespace sieve::lineage {

namespace {

inline void step(uint64_t l[4], const unsigned char* p) {
  for (int j = 0; j < 4; ++j) {
    uint64_t w;
    std::memcpy(&w, p + 8 * j, 8);
    l[j] = (l[j] ^ w) * 0x9fb21c651e98df25ULL;
    l[j] ^= l[j] >> 29;
  }
}

}  // namespace

uint64_t hash_bytes(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t l[4] = {mix64(seed), mix64(seed ^ 1), mix64(seed ^ 2), mix64(seed ^ 3)};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) step(l, p + i);
  if (i < n) {
    unsigned char tail[32] = {};
    std::memcpy(tail, p + i, n - i);
    step(l, tail);
  }
  return mix64(l[0] ^ mix64(l[1] ^ mix64(l[2] ^ mix64(l[3] ^ uint64_t(n)))));
}

void Fingerprint::add_row(uint64_t row_hash) {
  lo += mix64(row_hash ^ 0x5be1b2c3d4e5f607ULL);
  hi += mix64(row_hash ^ 0x0123456789abcdefULL);
}

std::string Fingerprint::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)hi, (unsigned long long)lo);
  return buf;
}

std::string fingerprint_of(const h5::File& f) {
  return f.has_attr("/", kFingerprint) ? f.attr_string("/", kFingerprint) : std::string();
}

std::string dataset_fingerprint_of(const h5::File& f) {
  if (f.has_attr("/", kDatasetFingerprint)) return f.attr_string("/", kDatasetFingerprint);
  if (f.has_attr("/", "schema") && f.attr_string("/", "schema") == schema::kDataset)
    return fingerprint_of(f);
  return "";
}

Lineage lineage_of(const std::string& path) {
  const h5::File f = h5::File::open(path);
  return Lineage{{Input{path, fingerprint_of(f)}}, dataset_fingerprint_of(f), ""};
}

std::string derived_fingerprint(const std::string& schema, const std::string& config_yaml,
                                const std::vector<Input>& inputs, const std::string& variant) {
  Fingerprint fp;
  // Position-tagged parts, so that the same texts in other roles give another fingerprint.
  uint64_t pos = 0;
  auto part = [&](const std::string& s) {
    const uint64_t at = pos++;
    fp.add_row(mix64(at) ^ hash_bytes(s.data(), s.size(), at));
  };
  part(schema);
  part(config_yaml);
  for (const Input& in : inputs) part(in.fingerprint);
  if (!variant.empty()) part(variant);
  return fp.hex();
}

void stamp_derived(h5::File& out, const std::string& schema, const std::string& config_yaml,
                   const Lineage& from) {
  const auto& inputs = from.inputs;
  const auto& dataset_fingerprint = from.dataset_fingerprint;
  std::vector<std::string> lines;
  for (const Input& in : inputs)
    lines.push_back(in.path + " " + (in.fingerprint.empty() ? "-" : in.fingerprint));
  if (!lines.empty()) out.set_attr("/", kInputs, lines);
  if (!dataset_fingerprint.empty()) out.set_attr("/", kDatasetFingerprint, dataset_fingerprint);
  out.set_attr("/", kFingerprint, derived_fingerprint(schema, config_yaml, inputs, from.variant));
}

void require_same_dataset(const std::string& derived_path, const std::string& derived_fp,
                          const std::string& dataset_path, const std::string& dataset_fp) {
  if (dataset_fp.empty()) return;
  if (derived_fp.empty())
    throw Error(cat(derived_path, ": no '", kDatasetFingerprint,
                    "' attribute, so it cannot be matched to ", dataset_path,
                    " (written by an older Sieve or by hand); re-run the stage that made it"));
  if (derived_fp != dataset_fp)
    throw Error(cat(derived_path, ": made from another dataset (dataset_fingerprint ",
                    derived_fp, ") than ", dataset_path, " (fingerprint ", dataset_fp,
                    "); re-run the stages after shard_dataset, or point at the matching files"));
}

void require_same_dataset(const h5::File& derived, const h5::File& dataset) {
  require_same_dataset(derived.path(), dataset_fingerprint_of(derived), dataset.path(),
                       fingerprint_of(dataset));
}

}  // namespace sieve::lineage
