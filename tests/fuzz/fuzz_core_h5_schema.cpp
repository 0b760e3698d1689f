// Fuzz the HDF5 open + schema/shape checks that every stage runs on its inputs: the bytes
// become a file; opening it and checking it must give sieve::Error or pass — never crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "io/h5.hpp"
#include "io/schemas.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/sieve-fuzz-h5-" + std::to_string(getpid()) + ".h5";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    sieve::h5::File file = sieve::h5::File::open(path);
    sieve::h5::require_schema(file, sieve::schema::kDataset);
    auto dims = file.require<uint8_t>("/train/images", 4);
    file.require<int32_t>("/train/labels", 1);
    if (file.has_attr("/", "class_names")) file.attr_strings("/", "class_names");
    if (!dims.empty() && dims[0] > 0 && dims[0] < 64) {
      std::vector<int32_t> labels(dims[0]);
      file.read_rows<int32_t>("/train/labels", 0, dims[0], labels.data());
    }
  } catch (const sieve::Error&) {
  }
  return 0;
}
