#include "data/image_decode.hpp"

// libjpeg's header needs FILE and size_t declared first.
#include <csetjmp>
#include <cstdio>
#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "util/error.hpp"

namespace sieve::data {

namespace {

// The whole file, into a buffer reused by the calling thread (no page faults per image).
const std::vector<uint8_t>& slurp(const std::string& path) {
  thread_local std::vector<uint8_t> buf;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error(cat(path, ": cannot open"));
  const std::streamsize n = in.tellg();
  in.seekg(0);
  buf.resize(size_t(std::max<std::streamsize>(n, 0)));
  if (n > 0 && !in.read(reinterpret_cast<char*>(buf.data()), n)) throw Error(cat(path, ": read failed"));
  return buf;
}

bool is_jpeg(const std::vector<uint8_t>& b) { return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF; }
bool is_png(const std::vector<uint8_t>& b) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return b.size() >= 8 && std::memcmp(b.data(), sig, 8) == 0;
}

std::string what_it_is(const std::vector<uint8_t>& b) {
  if (b.empty()) return "empty file (0 bytes)";
  return "not a JPEG or PNG file (unknown signature)";
}

// libjpeg reports errors through a callback that must not return: jump back, then throw
// outside the setjmp frame (no C++ object with a destructor lives across the jump).
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

extern "C" void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// A warning (level -1) is corrupt data that libjpeg would paint grey and go on: an error here.
extern "C" void jpeg_warn(j_common_ptr cinfo, int level) {
  if (level < 0) jpeg_fail(cinfo);
}

// Decode (or, with `header_only`, just read the header of) a JPEG held in memory. Returns
// false and fills `err` on failure.
bool jpeg_decode(const std::vector<uint8_t>& buf, bool header_only, int min_short_side,
                 RgbImage* out, ImageInfo* info, std::string* err) {
  jpeg_decompress_struct cinfo;
  JpegError jerr;
  cinfo.err = jpeg_std_error(&jerr.mgr);
  jerr.mgr.error_exit = jpeg_fail;
  jerr.mgr.emit_message = jpeg_warn;
  jerr.message[0] = 0;
  // Raw scanlines. A volatile pointer: its value set after setjmp must survive the jump.
  std::vector<uint8_t>* volatile rows = nullptr;
  if (setjmp(jerr.jump)) {
    *err = jerr.message;
    jpeg_destroy_decompress(&cinfo);
    delete rows;
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, buf.data(), static_cast<unsigned long>(buf.size()));
  jpeg_read_header(&cinfo, TRUE);
  info->width = int(cinfo.image_width);
  info->height = int(cinfo.image_height);
  info->format = "jpeg";
  if (header_only) {
    jpeg_destroy_decompress(&cinfo);
    return true;
  }
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  // IDCT scaling 1/2, 1/4, 1/8 while the shorter side stays large enough.
  const int shorter = int(std::min(cinfo.image_width, cinfo.image_height));
  int denom = 1;
  while (min_short_side > 0 && denom < 8 && shorter / (denom * 2) >= min_short_side) denom *= 2;
  cinfo.scale_num = 1;
  cinfo.scale_denom = unsigned(denom);
  jpeg_start_decompress(&cinfo);
  const int w = int(cinfo.output_width), h = int(cinfo.output_height), nc = cinfo.output_components;
  out->width = w;
  out->height = h;
  out->pixels.resize(size_t(w) * size_t(h) * 3);
  // RGB straight into the output; CMYK through a buffer of 4 components.
  if (nc != 3) rows = new std::vector<uint8_t>(size_t(w) * size_t(h) * size_t(nc));
  uint8_t* dst = nc == 3 ? out->pixels.data() : rows->data();
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = dst + size_t(cinfo.output_scanline) * size_t(w) * size_t(nc);
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  const bool adobe_inverted = cmyk && cinfo.saw_Adobe_marker;
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  if (nc != 3) {  // CMYK as PIL converts it: R = (255 - C)(255 - K)/255, on inverted (Adobe) values C*K/255
    const uint8_t* s = rows->data();
    uint8_t* d = out->pixels.data();
    for (size_t p = 0; p < size_t(w) * size_t(h); ++p, s += 4, d += 3) {
      const int k = adobe_inverted ? s[3] : 255 - s[3];
      for (int c = 0; c < 3; ++c) {
        const int v = adobe_inverted ? s[c] : 255 - s[c];
        d[c] = uint8_t((v * k + 127) / 255);
      }
    }
  }
  delete rows;
  return true;
}

bool png_decode(const std::vector<uint8_t>& buf, bool header_only, RgbImage* out, ImageInfo* info,
                std::string* err) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, buf.data(), buf.size())) {
    *err = img.message;
    return false;
  }
  info->width = int(img.width);
  info->height = int(img.height);
  info->format = "png";
  if (header_only) {
    png_image_free(&img);
    return true;
  }
  img.format = PNG_FORMAT_RGBA;  // alpha read and then dropped, as PIL's convert("RGB")
  std::vector<uint8_t> rgba(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, rgba.data(), 0, nullptr)) {
    *err = img.message;
    png_image_free(&img);
    return false;
  }
  out->width = int(img.width);
  out->height = int(img.height);
  out->pixels.resize(size_t(img.width) * img.height * 3);
  for (size_t p = 0; p < size_t(img.width) * img.height; ++p)
    std::memcpy(out->pixels.data() + 3 * p, rgba.data() + 4 * p, 3);
  return true;
}

void decode_any(const std::string& path, bool header_only, int min_short_side, RgbImage* out,
                ImageInfo* info) {
  const std::vector<uint8_t>& buf = slurp(path);
  std::string err;
  bool ok;
  if (is_jpeg(buf))
    ok = jpeg_decode(buf, header_only, min_short_side, out, info, &err);
  else if (is_png(buf))
    ok = png_decode(buf, header_only, out, info, &err);
  else
    throw Error(cat(path, ": ", what_it_is(buf)));
  if (!ok) throw Error(cat(path, ": corrupt ", is_jpeg(buf) ? "JPEG" : "PNG", " (", err, ")"));
  if (info->width <= 0 || info->height <= 0)
    throw Error(cat(path, ": image of ", info->width, "x", info->height, " pixels"));
}

// Per-output-pixel taps of the antialiased bilinear filter along one axis: output pixels
// [first, first + count) of an axis resized from `in` to `resized` pixels.
struct Taps {
  std::vector<int> start, size;
  std::vector<float> weight;  // `max_taps` per output pixel
  int max_taps = 0;
};

Taps make_taps(int in, int resized, int first, int count) {
  const double scale = double(in) / double(resized);
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;  // triangle filter: support 1, widened
  Taps t;
  t.max_taps = int(std::ceil(support)) * 2 + 1;
  t.start.resize(size_t(count));
  t.size.resize(size_t(count));
  t.weight.assign(size_t(count) * size_t(t.max_taps), 0.0f);
  for (int i = 0; i < count; ++i) {
    const double center = (first + i + 0.5) * scale;
    const int lo = std::max(int(center - support + 0.5), 0);
    const int hi = std::min(int(center + support + 0.5), in);
    double sum = 0;
    std::vector<double> w;
    for (int x = lo; x < hi; ++x) {
      const double d = std::fabs((x - center + 0.5) / filter_scale);
      w.push_back(d < 1.0 ? 1.0 - d : 0.0);
      sum += w.back();
    }
    t.start[size_t(i)] = lo;
    t.size[size_t(i)] = std::min(int(w.size()), t.max_taps);
    for (int k = 0; k < t.size[size_t(i)]; ++k)
      t.weight[size_t(i) * t.max_taps + k] = float(sum > 0 ? w[size_t(k)] / sum : 0.0);
  }
  return t;
}

}  // namespace

ImageInfo read_image_header(const std::string& path) {
  ImageInfo info;
  decode_any(path, true, 0, nullptr, &info);
  return info;
}

RgbImage decode_image(const std::string& path, int min_short_side) {
  RgbImage img;
  decode_image(path, min_short_side, &img);
  return img;
}

void decode_image(const std::string& path, int min_short_side, RgbImage* out) {
  ImageInfo info;
  decode_any(path, false, min_short_side, out, &info);
}

void resize_center_crop(const RgbImage& img, int resize, int crop, int channels, uint8_t* out) {
  SIEVE_ASSERT(resize >= crop && crop > 0, "resize ", resize, " < crop ", crop);
  SIEVE_ASSERT(channels == 1 || channels == 3, "channels ", channels);
  const int W = img.width, H = img.height;
  // torchvision: the shorter side becomes `resize`, the longer int(resize * long / short).
  const int rw = W <= H ? resize : int(int64_t(resize) * W / H);
  const int rh = W <= H ? int(int64_t(resize) * H / W) : resize;
  const int top = int(std::round((rh - crop) / 2.0)), left = int(std::round((rw - crop) / 2.0));
  const Taps tx = make_taps(W, rw, left, crop), ty = make_taps(H, rh, top, crop);
  // Input rows the crop needs, filtered horizontally once each.
  const int y0 = ty.start.front();
  const int y1 = ty.start.back() + ty.size.back();
  std::vector<float> rows(size_t(y1 - y0) * size_t(crop) * 3);
  for (int y = y0; y < y1; ++y) {
    const uint8_t* src = img.pixels.data() + size_t(y) * W * 3;
    float* dst = rows.data() + size_t(y - y0) * crop * 3;
    for (int x = 0; x < crop; ++x) {
      const float* w = tx.weight.data() + size_t(x) * tx.max_taps;
      const uint8_t* s = src + size_t(tx.start[size_t(x)]) * 3;
      float a = 0, b = 0, c = 0;
      for (int k = 0; k < tx.size[size_t(x)]; ++k, s += 3) {
        a += w[k] * s[0];
        b += w[k] * s[1];
        c += w[k] * s[2];
      }
      dst[3 * x] = a;
      dst[3 * x + 1] = b;
      dst[3 * x + 2] = c;
    }
  }
  // Round to nearest: the triangle's weights are >= 0, so values stay in 0..255 up to float
  // error; clamp, add 0.5, truncate (lround cost 6 % of the whole ingest).
  auto to_u8 = [](float v) { return uint8_t(std::min(255.0f, std::max(0.0f, v) + 0.5f)); };
  std::vector<float> acc(size_t(crop) * 3);
  for (int y = 0; y < crop; ++y) {
    const float* w = ty.weight.data() + size_t(y) * ty.max_taps;
    const int s0 = ty.start[size_t(y)] - y0;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int k = 0; k < ty.size[size_t(y)]; ++k) {  // whole rows: contiguous, vectorised
      const float* r = rows.data() + size_t(s0 + k) * crop * 3;
      const float wk = w[k];
      for (int i = 0; i < crop * 3; ++i) acc[size_t(i)] += wk * r[i];
    }
    uint8_t* o = out + size_t(y) * crop * channels;
    if (channels == 3) {
      for (int i = 0; i < crop * 3; ++i) o[i] = to_u8(acc[size_t(i)]);
    } else {  // ITU-R 601-2 luma, PIL's "L"
      for (int x = 0; x < crop; ++x)
        o[x] = to_u8((acc[3 * size_t(x)] * 299.0f + acc[3 * size_t(x) + 1] * 587.0f +
                      acc[3 * size_t(x) + 2] * 114.0f) / 1000.0f);
    }
  }
}

}  // namespace sieve::data
