// Lineage between files (io/lineage.hpp): the content hash, the order-independent
// fingerprint, derived fingerprints, and the check every join makes.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "io/lineage.hpp"
#include "util/error.hpp"

using namespace sieve;
using namespace sieve::lineage;

TEST(Lineage, HashBytesSeesEveryByteLengthAndSeed) {
  std::vector<unsigned char> a(77);
  std::iota(a.begin(), a.end(), 0);
  const uint64_t h = hash_bytes(a.data(), a.size(), 1);
  EXPECT_EQ(h, hash_bytes(a.data(), a.size(), 1));
  EXPECT_NE(h, hash_bytes(a.data(), a.size(), 2));
  EXPECT_NE(h, hash_bytes(a.data(), a.size() - 1, 1));
  for (size_t i : {size_t(0), size_t(31), size_t(32), size_t(76)}) {  // lanes and the tail
    auto b = a;
    b[i] ^= 1;
    EXPECT_NE(h, hash_bytes(b.data(), b.size(), 1)) << "byte " << i;
  }
  // Trailing zeros are not the same as a shorter input.
  std::vector<unsigned char> z(40, 0);
  EXPECT_NE(hash_bytes(z.data(), 33, 0), hash_bytes(z.data(), 34, 0));
}

TEST(Lineage, FingerprintIsOrderFreeButPositionAware) {
  std::vector<uint64_t> rows(500);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = hash_bytes(&i, sizeof i, 7);
  Fingerprint whole;
  for (auto r : rows) whole.add_row(r);
  // Any split into parts, summed in any order, gives the same fingerprint.
  std::mt19937 rng(3);
  auto shuffled = rows;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  Fingerprint a, b;
  for (size_t i = 0; i < shuffled.size(); ++i) (i < 123 ? a : b).add_row(shuffled[i]);
  b.add(a);
  EXPECT_EQ(b.hex(), whole.hex());
  EXPECT_EQ(whole.hex().size(), 32u);
  // One row changed, dropped or repeated: another fingerprint.
  Fingerprint changed, dropped, repeated;
  for (size_t i = 0; i < rows.size(); ++i) {
    changed.add_row(i == 10 ? rows[i] + 1 : rows[i]);
    if (i != 10) dropped.add_row(rows[i]);
    repeated.add_row(i == 11 ? rows[10] : rows[i]);
  }
  EXPECT_NE(changed.hex(), whole.hex());
  EXPECT_NE(dropped.hex(), whole.hex());
  EXPECT_NE(repeated.hex(), whole.hex());
}

TEST(Lineage, DerivedFingerprintFollowsSchemaConfigInputsAndVariant) {
  const std::vector<Input> in = {{"/r/dataset.h5", "00ff"}};
  const std::string base = derived_fingerprint("sieve.model/1", "a: 1\n", in);
  EXPECT_EQ(base, derived_fingerprint("sieve.model/1", "a: 1\n", {{"/elsewhere.h5", "00ff"}}))
      << "a moved input is the same input";
  EXPECT_NE(base, derived_fingerprint("sieve.features/1", "a: 1\n", in));
  EXPECT_NE(base, derived_fingerprint("sieve.model/1", "a: 2\n", in));
  EXPECT_NE(base, derived_fingerprint("sieve.model/1", "a: 1\n", {{"/r/dataset.h5", "00fe"}}));
  EXPECT_NE(base, derived_fingerprint("sieve.model/1", "a: 1\n", in, "early"));
}

TEST(Lineage, JoinsAreCheckedAgainstTheDataset) {
  EXPECT_NO_THROW(require_same_dataset("f.h5", "abc", "d.h5", "abc"));
  EXPECT_NO_THROW(require_same_dataset("f.h5", "", "d.h5", ""));     // hand-made dataset
  EXPECT_NO_THROW(require_same_dataset("f.h5", "abc", "d.h5", ""));  // not checkable
  try {
    require_same_dataset("run/filter.h5", "abc", "other/dataset.h5", "def");
    FAIL() << "a file from another dataset was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("run/filter.h5"), std::string::npos) << m;
    EXPECT_NE(m.find("other/dataset.h5"), std::string::npos) << m;
    EXPECT_NE(m.find("another dataset"), std::string::npos) << m;
  }
  // A derived file without lineage next to a dataset with one: refused (older Sieve).
  EXPECT_THROW(require_same_dataset("f.h5", "", "d.h5", "abc"), Error);
}
