// Fuzz the MNIST IDX reader (data/idx.cpp): the input becomes the four IDX files of one
// dataset directory (plain or gzip), which is opened with open_idx and read row by row.
// Any input must either read or raise sieve::Error — never crash, hang, trip ASan/UBSan or
// throw anything else (e.g. a header claiming huge dimensions must be an error, not a huge
// allocation).
//
// Byte 0 (flags): bit 0 gzip every file (".gz" names, zlib level 1); bit 1 name the files
// with a dot before "idx" (train-images.idx3-ubyte); bit 2 pass data.class_names = {a, b, c};
// bit 3 write each section raw under the ".gz" name (so the gzip reader sees arbitrary
// bytes: plain data, truncated or corrupt gzip streams).
// The rest: sections separated by "@@@@", in order train images, train labels, test images,
// test labels; absent sections are absent files.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_data_util.hpp"
#include "util/error.hpp"

namespace {

std::string gzip(std::string_view in) {
  // gzip wrapper (windowBits 15 + 16), level 1: cheap for the fuzzer's many executions.
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) __builtin_trap();
  std::string out(deflateBound(&z, uLong(in.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) __builtin_trap();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const sieve::Comm& comm = sieve::fuzz::world();
  const uint8_t flags = data[0];
  const bool gz = flags & 1, dot = flags & 2, names = flags & 4, raw_gz = flags & 8;
  auto sections = sieve::fuzz::split_sections(
      std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));

  std::string dir = sieve::fuzz::fresh_dir("idx");
  const char sepc = dot ? '.' : '-';
  const std::string files[4] = {std::string("train-images") + sepc + "idx3-ubyte",
                                std::string("train-labels") + sepc + "idx1-ubyte",
                                std::string("t10k-images") + sepc + "idx3-ubyte",
                                std::string("t10k-labels") + sepc + "idx1-ubyte"};
  for (size_t i = 0; i < 4 && i < sections.size(); ++i) {
    if (raw_gz)
      sieve::fuzz::write_file(dir + "/" + files[i] + ".gz", sections[i]);
    else if (gz)
      sieve::fuzz::write_file(dir + "/" + files[i] + ".gz", gzip(sections[i]));
    else
      sieve::fuzz::write_file(dir + "/" + files[i], sections[i]);
  }

  std::vector<std::string> class_names;
  if (names) class_names = {"a", "b", "c"};
  try {
    auto src = sieve::data::open_idx(dir, class_names, comm);
    sieve::fuzz::read_everything(*src);
    sieve::fuzz::outcome("read");
  } catch (const sieve::Error& e) {
    sieve::fuzz::outcome(e.what());
  }
  return 0;
}
