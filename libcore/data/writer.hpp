// Writes a Source as a `sieve.dataset/1` file (docs/formats.md) with parallel HDF5.
//
// All ranks take part: every output file is created collectively with the Comm, and each
// rank produces and writes (h5::File::write_rows, collective) a chunk-aligned block of
// rows of every split. With shards = K > 1 the rows of each split are cut into K
// contiguous slices, one complete dataset file per slice (`<stem>.shard-<k>.h5`), and the
// output path becomes an index file whose datasets are HDF5 virtual datasets over the
// shards, so readers see one dataset. Every file appears under its final name only when
// complete (AtomicOutput); the index is renamed into place last.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "data/source.hpp"

namespace sieve::data {

struct WriteOptions {
  std::string output;          // final path of the dataset (the index when shards > 1)
  int shards = 1;
  int64_t chunk_rows = 0;      // rows per HDF5 chunk of images/features (0: ~2 MiB of rows)
  bool overwrite = false;
  std::string config_yaml;     // stamped into every file (`config` attribute)
  bool sync = true;            // fsync the files before they are renamed into place
  bool progress = true;        // progress lines on rank 0
  int64_t batch_bytes = 8 << 20;  // rows per write call: about this many bytes per rank
  // OpenMP threads producing rows on each rank; 0: OMP_NUM_THREADS if set, else the
  // node's cores divided by the ranks on the node.
  int threads = 0;
};

struct WriteSummary {
  std::vector<std::string> files;  // shard files (K > 1) then the index / the single file
  int64_t rows[2] = {0, 0};
  int64_t label_noise = 0, outliers = 0;  // training rows (synthetic)
  std::vector<double> mean, std;
  std::string fingerprint;  // the whole dataset's content fingerprint (io/lineage.hpp)
  int64_t payload_bytes = 0;  // bytes of array data written (all ranks)
  int64_t file_bytes = 0;     // size of the files on disk
  double seconds = 0;         // from creating the files to the final rename
  // Where rank 0's time went: waiting for produced batches, in write calls, and in the
  // final statistics/index/fsync/rename step.
  double wait_s = 0, write_s = 0, finish_s = 0;
};

// Shard path of shard k of output "dir/stem.h5": "dir/stem.shard-<k>.h5".
std::string shard_path(const std::string& output, int k);

// Check the outputs up front (exists without overwrite, directory missing or not
// writable): collective, one message. Called by write_dataset too.
void check_outputs(const WriteOptions& opt, const Comm& comm);

WriteSummary write_dataset(const Source& src, const WriteOptions& opt, const Comm& comm);

}  // namespace sieve::data
