// The one 64-bit mixer every seeded draw and content hash in Sieve is built on.
#pragma once
#include <cstdint>

namespace sieve {

// SplitMix64 finaliser (Stafford's mix13): a good 64-bit bijective hash. Used for the
// synthetic data, training's shuffles and augmentation, and lineage fingerprints; changing
// it changes every generated dataset and every sample order.
inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Two values into one hash (the data generator's streams, derived seeds).
inline uint64_t hash_combine(uint64_t a, uint64_t b) {
  return mix64(a ^ mix64(b + 0x632be59bd9b4e019ULL));
}

}  // namespace sieve
