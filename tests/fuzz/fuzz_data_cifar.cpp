// Fuzz the CIFAR-10/100 binary-batch reader (data/cifar.cpp): the input becomes the batch
// files (and optionally the class-names file) of one dataset directory, which is opened with
// open_cifar and read row by row. Any input must either read or raise sieve::Error —
// never crash, hang, trip ASan/UBSan or throw anything else.
//
// Byte 0 (flags): bit 0 CIFAR-100; bit 1 the last section is the class-names file
// (batches.meta.txt / fine_label_names.txt); bit 2 files go in the archive's subdirectory
// (cifar-10-batches-bin/, cifar-100-binary/); bit 3 pass data.class_names = {a, b, c};
// bit 4 pad every non-empty batch file to a whole number of records (so short inputs make
// valid files and reach the label checks and the reads).
// The rest: sections separated by "@@@@", in order data_batch_1..5.bin, test_batch.bin
// (CIFAR-10) or train.bin, test.bin (CIFAR-100); absent sections are absent files.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_data_util.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const sieve::Comm& comm = sieve::fuzz::world();
  const uint8_t flags = data[0];
  const bool c100 = flags & 1, with_meta = flags & 2, subdir = flags & 4, names = flags & 8,
             pad = flags & 16;
  auto sections = sieve::fuzz::split_sections(
      std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));

  std::string root = sieve::fuzz::fresh_dir("cifar");
  std::string dir = root;
  if (subdir) {
    dir += c100 ? "/cifar-100-binary" : "/cifar-10-batches-bin";
    std::filesystem::create_directories(dir);
  }
  std::vector<std::string> files;
  if (c100) {
    files = {"train.bin", "test.bin"};
  } else {
    for (int i = 1; i <= 5; ++i) files.push_back("data_batch_" + std::to_string(i) + ".bin");
    files.push_back("test_batch.bin");
  }
  const size_t rec = c100 ? 3074 : 3073;
  size_t n_data = sections.size();
  if (with_meta && n_data > 0) {
    --n_data;
    sieve::fuzz::write_file(dir + (c100 ? "/fine_label_names.txt" : "/batches.meta.txt"),
                            sections.back());
  }
  for (size_t i = 0; i < files.size() && i < n_data; ++i) {
    std::string bytes(sections[i]);
    if (pad && !bytes.empty() && bytes.size() % rec != 0)
      bytes.resize((bytes.size() / rec + 1) * rec, '\x80');
    sieve::fuzz::write_file(dir + "/" + files[i], bytes);
  }

  std::vector<std::string> class_names;
  if (names) class_names = {"a", "b", "c"};
  try {
    auto src = sieve::data::open_cifar(root, c100, class_names, comm);
    sieve::fuzz::read_everything(*src);
    sieve::fuzz::outcome("read");
  } catch (const sieve::Error& e) {
    sieve::fuzz::outcome(e.what());
  }
  return 0;
}
