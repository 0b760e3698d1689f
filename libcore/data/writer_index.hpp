// What the files of a dataset share (data/writer.cpp writes them): the common attributes, the
// datasets' shapes, and the index file of a sharded dataset.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/source.hpp"
#include "data/writer.hpp"
#include "io/h5.hpp"

namespace sieve::data {

// The attributes every file of the dataset carries (each shard and the index alike).
void set_common_attrs(h5::File& f, const DatasetMeta& m);
// The shape of n rows of the dataset's images ([n, H, W, C]) or features ([n, F]).
std::vector<hsize_t> row_dims(const DatasetMeta& m, int64_t n);
// The index of a sharded dataset, at tmp_path (rank 0 alone): the whole dataset's attributes
// and statistics (from `sum`) and every dataset as a virtual dataset over the shard files
// (named relative to the index, so the set can move as a whole).
void write_index(const std::string& tmp_path, const DatasetMeta& m, const std::string& config_yaml,
                 const std::vector<std::string>& files, const WriteSummary& sum);

}  // namespace sieve::data
