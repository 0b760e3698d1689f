// Fuzz the CSV table reader (data/csv.cpp): the input becomes one CSV file, which is opened
// with open_csv and read row by row (features, labels, exact mean/std). Any input must
// either read or raise sieve::Error / sieve::UsageError — never crash, hang, trip ASan/UBSan
// or throw anything else.
//
// Byte 0 (options): bits 0-1 the label column: "species", "label", "y", or the empty name;
// bits 2-3 data.test_fraction: 0, 0.2, 0.5, 1; bit 4 pass data.class_names =
// {setosa, versicolor, virginica}; bits 5-7 data.seed. The rest is the file.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_data_util.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const sieve::Comm& comm = sieve::fuzz::world();
  const uint8_t opt = data[0];
  static const char* const kLabel[4] = {"species", "label", "y", ""};
  static const double kFraction[4] = {0.0, 0.2, 0.5, 1.0};
  std::string label = kLabel[opt & 3];
  double fraction = kFraction[(opt >> 2) & 3];
  std::vector<std::string> class_names;
  if (opt & 16) class_names = {"setosa", "versicolor", "virginica"};
  uint64_t seed = opt >> 5;

  std::string path = sieve::fuzz::fresh_dir("csv") + "/table.csv";
  sieve::fuzz::write_file(path, std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  try {
    auto src = sieve::data::open_csv(path, label, fraction, seed, class_names, comm);
    sieve::fuzz::read_everything(*src);
    sieve::fuzz::outcome("read");
  } catch (const sieve::Error& e) {
    sieve::fuzz::outcome(e.what());
  }
  return 0;
}
