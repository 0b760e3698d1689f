// Section "Most suspicious samples": per class, the images the chosen detector finds most
// suspicious, with their given and suggested labels and (where known) whether their label
// really was wrong. A person judges a detector fastest by looking at what it flags; a number
// says how often it is right on injected noise, the pictures say what it finds on real data.
#include <png.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <unordered_map>

#include "io/h5.hpp"
#include "report/sections.hpp"

namespace sieve::report {
namespace {

constexpr int kPerClass = 8;  // thumbnails per class
constexpr int kMinCell = 48;  // thumbnails are upscaled to at least this many pixels
constexpr int kBorder = 3;    // coloured frame: red = label truly wrong, green = right

void write_png_rgb(const std::string& path, int width, int height,
                   const std::vector<uint8_t>& rgb) {
  FILE* fp = std::fopen(path.c_str(), "wb");
  SIEVE_CHECK(fp, path, ": cannot open for writing");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(fp);
    throw Error(cat(path, ": PNG write failed"));
  }
  png_init_io(png, fp);
  png_set_IHDR(png, info, png_uint_32(width), png_uint_32(height), 8, PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < height; ++y)
    png_write_row(png, const_cast<png_bytep>(rgb.data() + size_t(y) * size_t(width) * 3));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  SIEVE_CHECK(std::fclose(fp) == 0, path, ": write failed");
}

struct Pick {
  int64_t row;  // filter file row
  int64_t image_row;
  float score;
};

}  // namespace

void section_suspicious(SectionContext& c) {
  const FilterInfo& f = c.data.filter;
  const DatasetInfo& ds = c.data.dataset;
  if (!f.present || !ds.present || ds.kind != "image" || ds.sample_shape.size() != 3) return;
  h5::File ff = h5::File::open(f.path);
  const std::string score_name = "/detectors/" + f.method + "/score";
  if (!ff.exists(score_name)) return;
  c.doc.section("Most suspicious samples", "suspicious");
  const auto ids = ff.read_all<int64_t>("/sample_id");
  const auto score = ff.read_all<float>(score_name);
  const bool have_suggested = ff.exists("/suggested_label");
  const auto suggested =
      have_suggested ? ff.read_all<int32_t>("/suggested_label") : std::vector<int32_t>();
  SIEVE_CHECK(score.size() == ids.size(), f.path, ": /sample_id and ", score_name,
              " differ in length");
  h5::File df = h5::File::open(ds.path);
  const auto dims = df.require<uint8_t>("/train/images", 4);
  const auto image_ids = df.read_all<int64_t>("/train/sample_id");
  const auto image_labels = df.read_all<int32_t>("/train/labels");
  std::unordered_map<int64_t, int64_t> image_row;
  for (size_t i = 0; i < image_ids.size(); ++i) image_row[image_ids[i]] = int64_t(i);
  // The given labels, from the dataset (joined on sample id, as every reader joins).
  std::vector<int32_t> labels(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = image_row.find(ids[i]);
    SIEVE_CHECK(it != image_row.end(), f.path, ": sample id ", ids[i], " is not in ", ds.path);
    labels[i] = image_labels[size_t(it->second)];
  }
  std::unordered_map<int64_t, uint8_t> truth;
  for (size_t i = 0; i < ds.train_sample_id.size(); ++i)
    truth[ds.train_sample_id[i]] = ds.noise_truth[i];

  // Per class, the kPerClass highest scores (ties: the lower row).
  std::map<int32_t, std::vector<Pick>> picks;
  std::vector<size_t> order(ids.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return score[a] > score[b]; });
  for (size_t i : order) {
    auto& v = picks[labels[i]];
    if (v.size() >= size_t(kPerClass)) continue;
    v.push_back({int64_t(i), image_row.at(ids[i]), score[i]});
  }

  const int h = int(dims[1]), w = int(dims[2]), ch = int(dims[3]);
  const int scale = std::max(1, (kMinCell + std::max(h, w) - 1) / std::max(h, w));
  const int cell_w = w * scale + 2 * kBorder, cell_h = h * scale + 2 * kBorder;
  const int width = kPerClass * cell_w, height = int(picks.size()) * cell_h;
  std::vector<uint8_t> canvas(size_t(width) * size_t(height) * 3, 255);
  std::vector<uint8_t> img(size_t(h) * w * ch);
  std::vector<Row> rows;
  int r = 0;
  for (const auto& [cls, v] : picks) {
    for (size_t k = 0; k < v.size(); ++k) {
      const Pick& p = v[k];
      df.read_rows<uint8_t>("/train/images", hsize_t(p.image_row), 1, img.data());
      const int64_t id = ids[size_t(p.row)];
      const bool known = truth.count(id) > 0;
      const bool wrong = known && truth[id] != 0;
      const uint8_t frame[3] = {uint8_t(known ? (wrong ? 214 : 44) : 160),
                                uint8_t(known ? (wrong ? 39 : 160) : 160),
                                uint8_t(known ? (wrong ? 40 : 44) : 160)};
      const int x0 = int(k) * cell_w, y0 = r * cell_h;
      for (int y = 0; y < cell_h; ++y)
        for (int x = 0; x < cell_w; ++x) {
          uint8_t* px = canvas.data() + (size_t(y0 + y) * width + size_t(x0 + x)) * 3;
          const int iy = (y - kBorder) / scale, ix = (x - kBorder) / scale;
          const bool inside = y >= kBorder && x >= kBorder && iy < h && ix < w;
          for (int q = 0; q < 3; ++q)
            px[q] = inside ? img[(size_t(iy) * w + size_t(ix)) * ch + size_t(ch == 3 ? q : 0)]
                           : frame[q];
        }
      const int32_t s = have_suggested ? suggested[size_t(p.row)] : -1;
      rows.push_back({class_name(c.data, cls), std::to_string(k + 1), std::to_string(id),
                      s >= 0 ? class_name(c.data, s) : std::string("n/a"), fmt(p.score, 4),
                      known ? (wrong ? "wrong" : "right") : "unknown"});
    }
    ++r;
  }
  if (rows.empty()) return;
  const std::string png = "figures/suspicious.png";  // always PNG: pixels, not a plot
  write_png_rgb(c.dir + "/" + png, width, height, canvas);
  write_csv(c.dir + "/data/suspicious.csv",
            {"given_label", "rank", "sample_id", "suggested_label", "score", "given_label_is"},
            rows);
  std::string row_names;
  for (const auto& [cls, v] : picks)
    row_names += (row_names.empty() ? "" : ", ") + class_name(c.data, cls);
  c.doc.paragraph(cat(
      "Per class (one row each, top to bottom: ", row_names, "), the ", kPerClass,
      " training images that ", f.method,
      " finds most suspicious, most suspicious on the left. Frame: red where the given label is "
      "known to be wrong (injected noise), green where it is known to be right, grey where "
      "nothing is known. The CSV lists each with its suggested label (the model's most "
      "likely class)."));
  c.doc.figure(
      png, cat("The ", kPerClass, " most suspicious training images of each class by ", f.method),
      {"data/suspicious.csv"}, "fig-suspicious");
}

}  // namespace sieve::report
