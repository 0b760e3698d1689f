// Decoding and resizing of image files for the folder source (data.source: folder).
//
// JPEG through libjpeg-turbo's libjpeg API and PNG through libpng's simplified API, both
// from Debian. The file type is told by its signature, not its name. Every image comes out
// as 8-bit RGB (grayscale replicated, palette expanded, 16-bit reduced, alpha dropped as
// torchvision's PIL .convert("RGB") does; CMYK/YCCK JPEGs converted, Adobe-inverted or
// not). Errors (and libjpeg's warnings about corrupt data, which it would otherwise paint
// grey) throw an Error naming the file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sieve::data {

struct ImageInfo {
  int width = 0, height = 0;
  std::string format;  // "jpeg" | "png"
};

// The header only (size, format); throws for anything that is not a readable JPEG/PNG header.
ImageInfo read_image_header(const std::string& path);

struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  // HWC, 3 channels
};

// The whole image as RGB. `min_short_side` > 0 lets the JPEG decoder scale down by 1/2, 1/4
// or 1/8 in its IDCT (fast and smooth) as long as the shorter side stays >= min_short_side.
RgbImage decode_image(const std::string& path, int min_short_side = 0);
// The same into `out`, reusing its memory (one per thread in a loop over many files).
void decode_image(const std::string& path, int min_short_side, RgbImage* out);

// torchvision's Resize(resize) + CenterCrop(crop): the shorter side scaled to `resize`
// (aspect kept), then the centre crop x crop. Antialiased bilinear (a triangle filter
// widened by the downscale factor, as Pillow and torchvision's antialias=True do). Only the
// cropped window is computed. out: crop*crop*channels bytes, HWC; channels 3, or 1 (ITU-R
// 601-2 luma, as PIL's "L").
void resize_center_crop(const RgbImage& img, int resize, int crop, int channels, uint8_t* out);

}  // namespace sieve::data
