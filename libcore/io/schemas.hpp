// Schema names and dataset paths: the contract between stages (docs/formats.md).
#pragma once

namespace sieve::schema {

inline constexpr const char* kDataset = "sieve.dataset/1";
inline constexpr const char* kModel = "sieve.model/1";
inline constexpr const char* kCheckpoint = "sieve.checkpoint/1";
inline constexpr const char* kFeatures = "sieve.features/1";
inline constexpr const char* kEmbedding = "sieve.embedding/1";
inline constexpr const char* kFilter = "sieve.filter/1";
// pretrain/dynamics.h5: per-sample margins at every epoch (train/dynamics.hpp).
inline constexpr const char* kDynamics = "sieve.dynamics/1";

}  // namespace sieve::schema
