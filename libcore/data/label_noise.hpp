// Injected label noise for real sources (data.label_noise): a fraction of the training
// labels flipped to another class, chosen with a seed, recorded as the ground truth
// (/train/noise_truth, noise_kind = label) exactly as the synthetic generator records its own.
//
// Why: on a real image set nobody knows which labels are wrong, so no detector can be scored.
// Flipping a known set of labels makes the question "does the filter find them, and does
// removing them help?" answerable on real images (docs/detection.md).
//
// Which rows: exactly round(fraction * N) training rows, those with the smallest keyed hash of
// (seed, row); the new label is y + 1 + (hash mod (classes - 1)), modulo classes, i.e. uniform
// over the other classes. Both are pure functions of the row, so the result does not depend on
// the ranks or on how the writer splits the rows. Test rows are never changed.
#pragma once
#include <memory>

#include "data/source.hpp"

namespace sieve::data {

// Wraps `inner` (which must not inject noise of its own). fraction in [0, 1).
std::unique_ptr<Source> with_label_noise(std::unique_ptr<Source> inner, double fraction,
                                         uint64_t seed);

}  // namespace sieve::data
