// data.source: folder — JPEG/PNG decoding (libjpeg-turbo, libpng), torchvision's
// Resize + CenterCrop geometry with antialiasing, and the ImageFolder layouts with the
// awkward files a real folder holds: a corrupt JPEG, an empty file, a text file named .png,
// a BMP, a README, a grayscale PNG and a CMYK JPEG.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <jpeglib.h>
#include <png.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <cstring>
#include <cmath>

#include "comm/comm.hpp"
#include "data/image_decode.hpp"
#include "data/source.hpp"
#include "support/test_util.hpp"

using namespace sieve;
using namespace sieve::data;
namespace fs = std::filesystem;

namespace {

// A JPEG of `comps` components (1 gray, 3 RGB, 4 CMYK written as Adobe-style inverted
// values) from interleaved samples.
void write_jpeg(const std::string& path, int w, int h, int comps, const std::vector<uint8_t>& px,
                int quality = 95) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  jpeg_stdio_dest(&c, f);
  c.image_width = unsigned(w);
  c.image_height = unsigned(h);
  c.input_components = comps;
  c.in_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  if (comps == 4) {
    jpeg_set_colorspace(&c, JCS_CMYK);
    c.write_Adobe_marker = TRUE;
  }
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(px.data()) + size_t(c.next_scanline) * w * comps;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

void write_png(const std::string& path, int w, int h, bool gray, const std::vector<uint8_t>& px) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = png_uint_32(w);
  img.height = png_uint_32(h);
  img.format = gray ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  ASSERT_TRUE(png_image_write_to_file(&img, path.c_str(), 0, px.data(), 0, nullptr)) << img.message;
}

std::vector<uint8_t> solid(int w, int h, std::vector<uint8_t> color) {
  std::vector<uint8_t> px;
  for (int i = 0; i < w * h; ++i) px.insert(px.end(), color.begin(), color.end());
  return px;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// ROOT/{cat,dog}: 3 good RGB JPEGs each (cat red, dog blue), a grayscale PNG in cat, a CMYK
// JPEG (pure cyan) in dog, and the bad ones.
std::string make_folder(const std::string& name) {
  std::string root = test::scratch_dir(name);
  fs::create_directories(root + "/cat/sub");
  fs::create_directories(root + "/dog");
  for (int i = 0; i < 3; ++i) {
    write_jpeg(cat(root, "/cat/", i, ".jpg"), 40 + i, 30, 3, solid(40 + i, 30, {220, 20, 20}));
    write_jpeg(cat(root, "/dog/", i, ".JPEG"), 30, 50, 3, solid(30, 50, {20, 20, 220}));
  }
  write_png(root + "/cat/sub/gray.png", 20, 20, true, solid(20, 20, {128}));
  // Cyan in CMYK, stored inverted as Adobe writes it: C=255 -> 0, M,Y,K=0 -> 255.
  write_jpeg(root + "/dog/cyan.jpg", 16, 16, 4, solid(16, 16, {0, 255, 255, 255}));
  // A JPEG cut in the middle of its data: the header reads, the body does not.
  std::vector<uint8_t> noise(128 * 128 * 3);  // a large body after a small header
  uint32_t state = 1;
  for (auto& v : noise) v = uint8_t((state = state * 1664525u + 1013904223u) >> 24);
  write_jpeg(root + "/cat/cut.jpg", 128, 128, 3, noise);
  fs::resize_file(root + "/cat/cut.jpg", fs::file_size(root + "/cat/cut.jpg") * 2 / 3);
  write_bytes(root + "/cat/empty.jpg", "");
  write_bytes(root + "/dog/fake.png", "this is a note, not a picture\n");
  write_bytes(root + "/dog/old.bmp", "BM not really");
  write_bytes(root + "/dog/README.txt", "notes");
  return root;
}

FolderOptions options(bool skip) {
  FolderOptions o;
  o.size = 8;
  o.resize = 8;
  o.skip_bad = skip;
  o.test_fraction = 0.0;
  o.seed = 5;
  return o;
}

}  // namespace

TEST(DataFolder, ResizeKeepsFlatColourAndAveragesOnDownscale) {
  RgbImage flat{37, 23, solid(37, 23, {10, 200, 77})};
  std::vector<uint8_t> out(8 * 8 * 3);
  resize_center_crop(flat, 8, 8, 3, out.data());
  for (size_t i = 0; i < out.size(); i += 3) {
    EXPECT_EQ(out[i], 10);
    EXPECT_EQ(out[i + 1], 200);
    EXPECT_EQ(out[i + 2], 77);
  }
  // Stripes one pixel wide, halved: the antialiased filter averages them (plain bilinear
  // sampling would pick stripes and alias).
  RgbImage stripes{32, 32, {}};
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x) stripes.pixels.insert(stripes.pixels.end(), 3, uint8_t(x % 2 ? 255 : 0));
  out.assign(16 * 16 * 3, 0);
  resize_center_crop(stripes, 16, 16, 3, out.data());
  for (int y = 1; y < 15; ++y)
    for (int x = 1; x < 15; ++x) EXPECT_NEAR(out[size_t(y * 16 + x) * 3], 127.5, 1.0) << x << "," << y;
  // Grayscale output: ITU-R 601-2 luma of the RGB.
  std::vector<uint8_t> g(8 * 8);
  resize_center_crop(flat, 8, 8, 1, g.data());
  EXPECT_EQ(g[0], uint8_t(std::lround((10 * 299 + 200 * 587 + 77 * 114) / 1000.0)));
}

TEST(DataFolder, ResizeThenCentreCropAsTorchvision) {
  // 40 x 20 (W x H), left half black, right half white; Resize(10): 20 x 10, CenterCrop(10):
  // columns 5..14 of the resized image = source columns 10..29; the edge (source 20) falls
  // at crop column 5.
  RgbImage img{40, 20, {}};
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 40; ++x) img.pixels.insert(img.pixels.end(), 3, uint8_t(x < 20 ? 0 : 255));
  std::vector<uint8_t> out(10 * 10 * 3);
  resize_center_crop(img, 10, 10, 3, out.data());
  for (int y = 0; y < 10; ++y) {
    for (int x = 0; x < 4; ++x) EXPECT_EQ(out[size_t(y * 10 + x) * 3], 0) << x;
    for (int x = 6; x < 10; ++x) EXPECT_EQ(out[size_t(y * 10 + x) * 3], 255) << x;
    EXPECT_GT(out[size_t(y * 10 + 5) * 3], out[size_t(y * 10 + 4) * 3]);
  }
}

TEST(DataFolder, DecodesJpegPngGrayAndCmykAndNamesBadFiles) {
  std::string root = make_folder("data_folder_decode");
  RgbImage red = decode_image(root + "/cat/0.jpg");
  EXPECT_EQ(red.width, 40);
  EXPECT_EQ(red.height, 30);
  EXPECT_NEAR(red.pixels[0], 220, 6);
  EXPECT_NEAR(red.pixels[1], 20, 6);
  RgbImage gray = decode_image(root + "/cat/sub/gray.png");
  EXPECT_EQ(gray.pixels[0], 128);
  EXPECT_EQ(gray.pixels[1], 128);
  EXPECT_EQ(gray.pixels[2], 128);
  RgbImage cyan = decode_image(root + "/dog/cyan.jpg");
  EXPECT_NEAR(cyan.pixels[0], 0, 8);
  EXPECT_NEAR(cyan.pixels[1], 255, 8);
  EXPECT_NEAR(cyan.pixels[2], 255, 8);
  // The IDCT may scale down, never below the asked shorter side.
  RgbImage small = decode_image(root + "/cat/0.jpg", 15);
  EXPECT_EQ(small.height, 15);
  EXPECT_EQ(small.width, 20);
  struct Bad {
    const char* file;
    const char* says;
  };
  for (Bad b : {Bad{"/cat/cut.jpg", "corrupt JPEG"}, Bad{"/cat/empty.jpg", "empty file"},
                Bad{"/dog/fake.png", "not a JPEG or PNG"}}) {
    try {
      decode_image(root + b.file);
      FAIL() << b.file << " decoded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(b.file), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(b.says), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(read_image_header(root + "/cat/cut.jpg"));  // the header is intact
}

TEST(DataFolder, FailModeNamesTheUnreadableFilesAndWritesNothing) {
  std::string root = make_folder("data_folder_fail");
  Comm comm = Comm::world();
  try {
    open_folder(root, options(false), {}, comm);
    FAIL() << "a folder with unreadable files was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    // Found from headers: the empty file, the text file and the BMP (the cut JPEG's header
    // is intact: its body fails when it is written, naming it, below).
    EXPECT_NE(m.find("3 unreadable image file(s)"), std::string::npos) << m;
    EXPECT_NE(m.find("data.folder.on_error=skip"), std::string::npos) << m;
  }
  // Without the header-level failures, the cut JPEG fails in produce(), naming the file.
  fs::remove(root + "/cat/empty.jpg");
  fs::remove(root + "/dog/fake.png");
  fs::remove(root + "/dog/old.bmp");
  auto src = open_folder(root, options(false), {}, comm);
  const DatasetMeta& m = src->meta();
  ASSERT_EQ(m.rows(Split::Train), 9);
  std::vector<uint8_t> px(size_t(m.row_elems()) * 9);
  std::vector<int32_t> labels(9);
  Rows rows;
  rows.images = px.data();
  rows.labels = labels.data();
  try {
    src->produce(Split::Train, 0, 9, rows);
    FAIL() << "the cut JPEG was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cut.jpg"), std::string::npos) << e.what();
  }
}

TEST(DataFolder, SkipModeLeavesOutAndListsTheUnreadableFiles) {
  std::string root = make_folder("data_folder_skip");
  Comm comm = Comm::world();
  auto src = open_folder(root, options(true), {}, comm);
  const DatasetMeta& m = src->meta();
  EXPECT_EQ(m.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(m.height, 8);
  EXPECT_EQ(m.channels, 3);
  ASSERT_EQ(m.rows(Split::Train), 8);  // 3 + 3 JPEGs, the gray PNG, the CMYK JPEG
  EXPECT_EQ(m.rows(Split::Test), 0);
  std::set<std::string> skipped;
  for (auto& p : m.skipped) skipped.insert(fs::path(p).filename().string());
  EXPECT_EQ(skipped, (std::set<std::string>{"cut.jpg", "empty.jpg", "fake.png", "old.bmp"}));
  std::vector<uint8_t> px(size_t(m.row_elems()) * 8);
  std::vector<int32_t> labels(8);
  Rows rows;
  rows.images = px.data();
  rows.labels = labels.data();
  src->produce(Split::Train, 0, 8, rows);
  int n_red = 0, n_blue = 0, n_gray = 0, n_cyan = 0;
  for (int i = 0; i < 8; ++i) {
    const uint8_t* p = px.data() + size_t(i) * m.row_elems() + 3 * (4 * 8 + 4);  // centre pixel
    if (p[0] > 180 && p[2] < 60) n_red += labels[size_t(i)] == 0;
    if (p[2] > 180 && p[0] < 60 && p[1] < 60) n_blue += labels[size_t(i)] == 1;
    if (p[0] == 128 && p[1] == 128 && p[2] == 128) n_gray += labels[size_t(i)] == 0;
    if (p[0] < 20 && p[1] > 230 && p[2] > 230) n_cyan += labels[size_t(i)] == 1;
  }
  EXPECT_EQ(n_red, 3);
  EXPECT_EQ(n_blue, 3);
  EXPECT_EQ(n_gray, 1);
  EXPECT_EQ(n_cyan, 1);
}

TEST(DataFolder, TrainAndValTreesAndAStratifiedFraction) {
  std::string root = test::scratch_dir("data_folder_trees");
  for (const char* t : {"train", "val"})
    for (const char* c : {"a", "b"}) {
      fs::create_directories(cat(root, "/", t, "/", c));
      for (int i = 0; i < (std::string(t) == "train" ? 10 : 2); ++i)
        write_png(cat(root, "/", t, "/", c, "/", i, ".png"), 8, 8, false, solid(8, 8, {uint8_t(i), 0, 0}));
    }
  Comm comm = Comm::world();
  auto src = open_folder(root, options(false), {}, comm);
  EXPECT_EQ(src->meta().rows(Split::Train), 20);
  EXPECT_EQ(src->meta().rows(Split::Test), 4);
  // Labels alone (what data.label_noise with a class map reads) match the decoded rows'.
  std::vector<uint8_t> px(20 * 8 * 8 * 3);
  std::vector<int32_t> decoded(20), alone(20, -1);
  Rows rows;
  rows.images = px.data();
  rows.labels = decoded.data();
  src->produce(Split::Train, 0, 20, rows);
  rows.images = nullptr;
  rows.labels = alone.data();
  src->produce_labels(Split::Train, 0, 20, rows);
  EXPECT_EQ(alone, decoded);
  EXPECT_EQ(std::count(decoded.begin(), decoded.end(), 1), 10);
  // Without a val tree: a stratified test fraction of each class.
  FolderOptions frac = options(false);
  frac.test_fraction = 0.2;
  auto s2 = open_folder(root + "/train", frac, {}, comm);
  EXPECT_EQ(s2->meta().rows(Split::Train), 16);
  EXPECT_EQ(s2->meta().rows(Split::Test), 4);
  // A val class the training tree lacks is an error naming it.
  fs::create_directories(root + "/val/c");
  write_png(root + "/val/c/0.png", 8, 8, false, solid(8, 8, {1, 2, 3}));
  try {
    open_folder(root, options(false), {}, comm);
    FAIL() << "a val class unknown to train was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("val/c"), std::string::npos) << e.what();
  }
}

TEST(DataFolder, ClassNamesRenameByPositionButNeverReorderTheDirectories) {
  std::string root = test::scratch_dir("data_folder_names");
  for (const char* c : {"Bag", "Coat", "Dress"}) {
    fs::create_directories(cat(root, "/", c));
    write_png(cat(root, "/", c, "/0.png"), 8, 8, false, solid(8, 8, {1, 2, 3}));
  }
  Comm comm = Comm::world();
  // Display names for directories (ImageNet's wnids, say) rename class k, the k-th sorted one.
  auto renamed = open_folder(root, options(false), {"bag", "coat", "dress"}, comm);
  EXPECT_EQ(renamed->meta().class_names, (std::vector<std::string>{"bag", "coat", "dress"}));
  // The directories' own names in their own order are accepted as they are.
  auto same = open_folder(root, options(false), {"Bag", "Coat", "Dress"}, comm);
  EXPECT_EQ(same->meta().class_names, (std::vector<std::string>{"Bag", "Coat", "Dress"}));
  // A directory's name at another position would put it on another class's images.
  try {
    open_folder(root, options(false), {"Dress", "Coat", "Bag"}, comm);
    FAIL() << "class names that reorder the directories were accepted";
  } catch (const UsageError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("data.class_names[0] is 'Dress'"), std::string::npos) << what;
    EXPECT_NE(what.find("the directory 'Bag'"), std::string::npos) << what;
    EXPECT_NE(what.find("'Dress' is class 2"), std::string::npos) << what;
  }
}
