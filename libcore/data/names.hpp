// Object names of the dataset file (docs/formats.md, `sieve.dataset/1`) and the split enum.
//
// Every stage that reads a dataset may use these instead of spelling the HDF5 paths.
#pragma once
#include <string>

namespace sieve::data {

enum class Split { Train = 0, Test = 1 };
inline constexpr Split kSplits[] = {Split::Train, Split::Test};

inline const char* split_name(Split s) { return s == Split::Train ? "train" : "test"; }

enum class Kind { Image, Tabular };
inline const char* kind_name(Kind k) { return k == Kind::Image ? "image" : "tabular"; }

// "/train/images" etc.
inline std::string images_path(Split s) { return std::string("/") + split_name(s) + "/images"; }
inline std::string features_path(Split s) { return std::string("/") + split_name(s) + "/features"; }
inline std::string labels_path(Split s) { return std::string("/") + split_name(s) + "/labels"; }
inline std::string sample_id_path(Split s) { return std::string("/") + split_name(s) + "/sample_id"; }
// Synthetic data or data.label_noise: 1 = injected label noise or outlier (formats.md).
inline std::string noise_truth_path(Split s) { return std::string("/") + split_name(s) + "/noise_truth"; }
// Beside noise_truth, an extra: 0 clean, 1 label noise, 2 outlier image.
inline std::string noise_kind_path(Split s) { return std::string("/") + split_name(s) + "/noise_kind"; }
// Where noise is injected (synthetic, data.label_noise): the label before any flip.
inline std::string clean_labels_path(Split s) { return std::string("/") + split_name(s) + "/clean_labels"; }

inline constexpr int kNoiseClean = 0;
inline constexpr int kNoiseLabel = 1;
inline constexpr int kNoiseOutlier = 2;

// Sample ids: train rows are 0..N_train-1 in file order, test rows continue at N_train.
inline long long first_sample_id(Split s, long long n_train) { return s == Split::Train ? 0 : n_train; }

}  // namespace sieve::data
