// Counter-based randomness for data generation: every sample's random stream is a pure
// function of (seed, stream tag, sample index), so a dataset is identical whatever the
// number of ranks or threads that produce it.
#pragma once
#include <cmath>
#include <cstdint>

#include "util/hash.hpp"

namespace sieve::data {

using ::sieve::hash_combine;
using ::sieve::mix64;
inline uint64_t hash3(uint64_t a, uint64_t b, uint64_t c) { return hash_combine(hash_combine(a, b), c); }

// A small, fast generator (SplitMix64 stream) seeded from a hash.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 bits (float) or 53 bits (double).
  float uniformf() { return float(next() >> 40) * (1.0f / 16777216.0f); }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  float uniformf(float lo, float hi) { return lo + (hi - lo) * uniformf(); }
  // Uniform integer in [0, n) (n > 0), multiply-shift (bias < 2^-32 for n < 2^32).
  uint64_t below(uint64_t n) { return uint64_t((unsigned __int128)next() * n >> 64); }
  // Standard normal (Box-Muller; one value per call).
  double normal() {
    double u1 = (double(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = double(next() >> 11) * (1.0 / 9007199254740992.0);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Cheap approximately normal value (Irwin-Hall of four 16-bit uniforms, unit variance):
  // for pixel noise, where speed matters more than tails.
  float fast_normal() {
    uint64_t r = next();
    int s = int(r & 0xffff) + int((r >> 16) & 0xffff) + int((r >> 32) & 0xffff) + int(r >> 48);
    return (float(s) - 131070.0f) * (1.7320508f / 65535.0f);
  }

 private:
  uint64_t s_;
};

// A keyed bijection of [0, n): balanced Feistel network on the next even number of bits,
// cycle-walking back into range. O(1) memory, so a rank can ask "where does index i go"
// without the whole permutation (exact-count selections over any number of ranks).
class IndexPermutation {
 public:
  IndexPermutation(uint64_t n, uint64_t key) : n_(n), key_(key) {
    int bits = 2;
    while (bits < 64 && (uint64_t(1) << bits) < n) bits += 2;
    half_ = bits / 2;
    mask_ = (uint64_t(1) << half_) - 1;
  }
  uint64_t operator()(uint64_t i) const {
    uint64_t x = i;
    do x = round_trip(x);
    while (x >= n_);
    return x;
  }

 private:
  uint64_t round_trip(uint64_t x) const {
    uint64_t l = x >> half_, r = x & mask_;
    for (int k = 0; k < 4; ++k) {
      uint64_t f = hash3(key_, uint64_t(k), r) & mask_;
      uint64_t nl = r, nr = l ^ f;
      l = nl;
      r = nr;
    }
    return (l << half_) | r;
  }
  uint64_t n_, key_;
  int half_;
  uint64_t mask_;
};

}  // namespace sieve::data
