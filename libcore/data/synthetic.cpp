#include "data/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <bit>

#include "data/rng.hpp"
#include "util/error.hpp"

namespace sieve::data {
namespace {

constexpr int kShapes = 8;
constexpr int kTextures = 4;
const char* const kShapeNames[kShapes] = {"disc", "square", "triangle", "ring",
                                          "plus", "flower", "bar",      "crescent"};
const char* const kTextureNames[kTextures] = {"solid", "stripes", "checker", "shaded"};

// Stream tags: independent random streams per purpose.
constexpr uint64_t kTagDraw = 0x64726177;     // "draw"
constexpr uint64_t kTagLabel = 0x6c61626c;    // "labl"
constexpr uint64_t kTagSelect = 0x73656c65;   // "sele"

struct Rgb {
  float r, g, b;
};

Rgb hsv(float h, float s, float v) {
  h -= __builtin_floorf(h);
  float h6 = h * 6.0f;
  int i = int(h6);
  float f = h6 - float(i);
  float p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
  switch (i % 6) {
    case 0: return {v, t, p};
    case 1: return {q, v, p};
    case 2: return {p, v, t};
    case 3: return {p, q, v};
    case 4: return {t, p, v};
    default: return {v, p, q};
  }
}

inline float clamp01(float x) { return x < 0 ? 0 : (x > 1 ? 1 : x); }

// Signed distance (negative inside) in shape units: the shape fits in the unit disc.
// Branch-free min/max by value (std::min/max return references, which blocks vectorisation).
inline float mx(float a, float b) { return a > b ? a : b; }
inline float mn(float a, float b) { return a < b ? a : b; }
// floor for |x| < 2^31 by truncation (vectorises without -fno-trapping-math).
inline float ffloor(float x) {
  float t = float(int(x));
  return t > x ? t - 1.0f : t;
}
// sqrt of x >= 0 by two Newton steps on the bit-trick inverse square root (relative error
// ~1e-6): plain arithmetic, so the per-pixel loops vectorise (std::sqrt sets errno).
inline float fsqrt(float x) {
  float y = std::bit_cast<float>(0x5f375a86u - (std::bit_cast<uint32_t>(x) >> 1));
  y = y * (1.5f - 0.5f * x * y * y);
  y = y * (1.5f - 0.5f * x * y * y);
  return x * y;
}

template <int Shape>
inline float shape_sdf(float u, float v) {
  float au = __builtin_fabsf(u), av = __builtin_fabsf(v);
  if constexpr (Shape == 0) return fsqrt(u * u + v * v) - 0.85f;
  if constexpr (Shape == 1) return mx(au, av) - 0.66f;
  if constexpr (Shape == 2) return mx(au * 0.8660254f + v * 0.5f, -v) - 0.47f;
  if constexpr (Shape == 3) return __builtin_fabsf(fsqrt(u * u + v * v) - 0.64f) - 0.22f;
  if constexpr (Shape == 4)
    return mn(mx(au - 0.88f, av - 0.27f), mx(au - 0.27f, av - 0.88f));
  if constexpr (Shape == 5) {
    // Five-petal flower: r = 0.62 + 0.3 cos(5 theta); cos(5 theta) = Re((u + iv)^5) / r^5.
    float r2 = u * u + v * v + 1e-12f, r = fsqrt(r2);
    float u2 = u * u, v2 = v * v;
    float c5 = u * (u2 * u2 - 10.0f * u2 * v2 + 5.0f * v2 * v2) / (r2 * r2 * r);
    return (r - (0.62f + 0.3f * c5)) * 0.7f;
  }
  if constexpr (Shape == 6) return mx(au - 0.92f, av - 0.3f);
  if constexpr (Shape == 7) {
    float r1 = fsqrt(u * u + v * v);
    float du = u - 0.42f;
    float r2 = fsqrt(du * du + v * v);
    return mx(r1 - 0.88f, 0.68f - r2);
  }
  return 0.0f;
}

// Brightness factor in [0.35, 1] of the foreground texture at local (u, v).
template <int Tex>
inline float texture(float u, float v, float freq) {
  if constexpr (Tex == 0) return 1.0f;
  if constexpr (Tex == 1) {
    float x = u * freq;
    return 1.0f - 0.65f * ffloor(2.0f * (x - ffloor(x)));  // 1 or 0.35
  }
  if constexpr (Tex == 2) {
    float a = ffloor(u * freq) + ffloor(v * freq);
    return 0.35f + 0.65f * (a - 2.0f * ffloor(0.5f * a));  // parity: 1 or 0.35
  }
  if constexpr (Tex == 3) return 1.0f - 0.65f * clamp01(fsqrt(u * u + v * v));
  return 1.0f;
}

// Planar float image (R, G, B planes of H*W) being composed for one sample.
struct Canvas {
  int H, W;
  float* p[3];
};

struct ShapeDraw {
  float cx, cy, radius, cr, sr, freq;
  Rgb fg;
  int x0, x1, y0, y1;  // bounding box (pixels)
};

template <int Shape, int Tex>
void composite(Canvas& cv, const ShapeDraw& d) {
  const float cx = d.cx, cy = d.cy, cr = d.cr, sr = d.sr, radius = d.radius, freq = d.freq;
  const float fr = d.fg.r, fg = d.fg.g, fb = d.fg.b;
  for (int y = d.y0; y < d.y1; ++y) {
    float ey = float(y) + 0.5f - cy;
    float* __restrict R = cv.p[0] + size_t(y) * cv.W;
    float* __restrict G = cv.p[1] + size_t(y) * cv.W;
    float* __restrict B = cv.p[2] + size_t(y) * cv.W;
#pragma omp simd
    for (int x = d.x0; x < d.x1; ++x) {
      float ex = float(x) + 0.5f - cx;
      float u = cr * ex + sr * ey, v = -sr * ex + cr * ey;
      float a = clamp01(0.5f - shape_sdf<Shape>(u, v) * radius);
      float t = texture<Tex>(u, v, freq) * a;
      R[x] += (fr * t - R[x] * a);
      G[x] += (fg * t - G[x] * a);
      B[x] += (fb * t - B[x] * a);
    }
  }
}

using CompositeFn = void (*)(Canvas&, const ShapeDraw&);
template <int Shape>
CompositeFn composite_for(int tex) {
  switch (tex) {
    case 0: return composite<Shape, 0>;
    case 1: return composite<Shape, 1>;
    case 2: return composite<Shape, 2>;
    default: return composite<Shape, 3>;
  }
}
CompositeFn composite_fn(int shape, int tex) {
  switch (shape) {
    case 0: return composite_for<0>(tex);
    case 1: return composite_for<1>(tex);
    case 2: return composite_for<2>(tex);
    case 3: return composite_for<3>(tex);
    case 4: return composite_for<4>(tex);
    case 5: return composite_for<5>(tex);
    case 6: return composite_for<6>(tex);
    default: return composite_for<7>(tex);
  }
}

// Counter-based 32-bit hash (murmur3 finaliser): vectorisable per-pixel randomness.
inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}
// Approximately standard normal: Irwin-Hall sum of the hash's four bytes.
inline float hash_normal(uint32_t key, uint32_t i) {
  uint32_t h = hash32(key + i * 0x9e3779b9u);
  uint32_t pairs = (h & 0x00ff00ffu) + ((h >> 8) & 0x00ff00ffu);  // two 16-bit byte-pair sums
  float s = float((pairs & 0xffffu) + (pairs >> 16));
  return (s - 510.0f) * (1.0f / 147.8f);
}

inline int to_byte_int(float v) {  // v in pixel units: round and clamp to 0..255
  int i = int(v + 0.5f);
  i = i < 0 ? 0 : i;
  return i > 255 ? 255 : i;
}

// Quantise the canvas to HWC bytes with Gaussian pixel noise of std `sigma` (0..255 units);
// the noise of byte j of the image is hash_normal(key, j).
void quantize(const Canvas& cv, int C, float sigma, uint32_t key, uint8_t* __restrict out) {
  const int n = cv.H * cv.W;
  const float* __restrict R = cv.p[0];
  const float* __restrict G = cv.p[1];
  const float* __restrict B = cv.p[2];
  if (C == 1) {
#pragma omp simd
    for (int i = 0; i < n; ++i) {
      float y = (0.299f * R[i] + 0.587f * G[i] + 0.114f * B[i]) * 255.0f + sigma * hash_normal(key, uint32_t(i));
      out[i] = uint8_t(to_byte_int(y));
    }
    return;
  }
#pragma omp simd
  for (int i = 0; i < n; ++i) {
    uint32_t j = uint32_t(3 * i);
    out[3 * i] = uint8_t(to_byte_int(R[i] * 255.0f + sigma * hash_normal(key, j)));
    out[3 * i + 1] = uint8_t(to_byte_int(G[i] * 255.0f + sigma * hash_normal(key, j + 1)));
    out[3 * i + 2] = uint8_t(to_byte_int(B[i] * 255.0f + sigma * hash_normal(key, j + 2)));
  }
}

// Per-thread planar scratch image.
Canvas canvas(int H, int W) {
  static thread_local std::vector<float> buf;
  buf.resize(size_t(3) * H * W);
  Canvas cv{H, W, {buf.data(), buf.data() + size_t(H) * W, buf.data() + size_t(2) * H * W}};
  return cv;
}

struct ClassFamily {
  int shape, texture;
  float hue, freq;
};

ClassFamily family(int c) {
  ClassFamily f;
  f.shape = c % kShapes;
  f.texture = (c + c / kShapes) % kTextures;
  // Golden-ratio hues: well spread for any K, neighbours overlap under jitter.
  f.hue = float(std::fmod(0.05 + 0.6180339887 * c, 1.0));
  f.freq = 2.2f * (1.0f + 0.35f * float((c / (kShapes * kTextures)) % 3));
  return f;
}

inline Rgb lerp(Rgb a, Rgb b, float t) {
  return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t};
}

}  // namespace

SyntheticGenerator::SyntheticGenerator(const SyntheticSpec& spec) : spec_(spec) {
  SIEVE_ASSERT(spec_.classes >= 2 && spec_.height > 0 && spec_.width > 0 &&
               (spec_.channels == 1 || spec_.channels == 3));
  n_train_ = int64_t(spec_.classes) * spec_.train_per_class;
  n_test_ = int64_t(spec_.classes) * spec_.test_per_class;
  n_label_noise_ = std::llround(spec_.label_noise * double(n_train_));
  n_outliers_ = std::llround(spec_.outliers * double(n_train_));
  n_label_noise_ = std::clamp<int64_t>(n_label_noise_, 0, n_train_);
  n_outliers_ = std::clamp<int64_t>(n_outliers_, 0, n_train_ - n_label_noise_);
  noise_key_ = hash_combine(spec_.seed, kTagSelect);
}

std::vector<std::string> SyntheticGenerator::class_names() const {
  std::vector<std::string> names;
  for (int c = 0; c < spec_.classes; ++c) {
    ClassFamily f = family(c);
    std::string n = std::string(kShapeNames[f.shape]) + "-" + kTextureNames[f.texture];
    int variant = c / (kShapes * kTextures);
    if (variant > 0) n += "-v" + std::to_string(variant);
    names.push_back(n);
  }
  return names;
}

SyntheticSample SyntheticGenerator::describe(Split split, int64_t index) const {
  SyntheticSample s;
  s.true_class = int32_t(index % spec_.classes);
  s.label = s.true_class;
  s.noise = kNoiseClean;
  if (split == Split::Train && n_label_noise_ + n_outliers_ > 0) {
    // Keyed permutation of the training indices: the first n_label_noise positions get
    // label noise, the next n_outliers become outliers (exact counts, rank-independent).
    uint64_t p = IndexPermutation(uint64_t(n_train_), noise_key_)(uint64_t(index));
    if (p < uint64_t(n_label_noise_)) {
      Rng r(hash3(spec_.seed, kTagLabel, uint64_t(index)));
      s.label = int32_t((s.true_class + 1 + int64_t(r.below(uint64_t(spec_.classes - 1)))) %
                        spec_.classes);
      s.noise = kNoiseLabel;
    } else if (p < uint64_t(n_label_noise_ + n_outliers_)) {
      s.noise = kNoiseOutlier;
    }
  }
  return s;
}

SyntheticSample SyntheticGenerator::generate(Split split, int64_t index, uint8_t* image) const {
  SyntheticSample s = describe(split, index);
  uint64_t seed = hash3(hash_combine(spec_.seed, kTagDraw), uint64_t(split), uint64_t(index));
  if (s.noise == kNoiseOutlier)
    draw_outlier(seed, image);
  else
    draw_class(s.true_class, seed, image);
  return s;
}

void SyntheticGenerator::generate_batch(Split split, int64_t row0, int64_t count, uint8_t* images,
                                        int32_t* labels, uint8_t* noise) const {
  const int64_t rb = row_bytes();
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < count; ++i) {
    SyntheticSample s = generate(split, row0 + i, images + i * rb);
    labels[i] = s.label;
    if (noise) noise[i] = s.noise;
  }
}

void SyntheticGenerator::draw_class(int cls, uint64_t seed, uint8_t* image) const {
  const int H = spec_.height, W = spec_.width, C = spec_.channels;
  const float minhw = float(std::min(H, W)), maxhw = float(std::max(H, W));
  Rng rng(seed);
  ClassFamily fam = family(cls);
  Canvas cv = canvas(H, W);

  // Background: a linear gradient between two random muted colours.
  Rgb bg0 = hsv(rng.uniformf(), rng.uniformf(0.0f, 0.5f), rng.uniformf(0.15f, 0.85f));
  Rgb bg1 = hsv(rng.uniformf(), rng.uniformf(0.0f, 0.5f), rng.uniformf(0.15f, 0.85f));
  float ga = rng.uniformf(0.0f, 6.2831853f);
  float gx = std::cos(ga) / maxhw, gy = std::sin(ga) / maxhw;
  for (int y = 0; y < H; ++y) {
    float base = 0.5f + (0.5f - 0.5f * float(W)) * gx + (float(y) + 0.5f - 0.5f * float(H)) * gy;
    float* R = cv.p[0] + size_t(y) * W;
    float* G = cv.p[1] + size_t(y) * W;
    float* B = cv.p[2] + size_t(y) * W;
#pragma omp simd
    for (int x = 0; x < W; ++x) {
      float g = clamp01(base + float(x) * gx);
      R[x] = bg0.r + (bg1.r - bg0.r) * g;
      G[x] = bg0.g + (bg1.g - bg0.g) * g;
      B[x] = bg0.b + (bg1.b - bg0.b) * g;
    }
  }

  // The object: class shape/texture/hue with random pose and colour jitter.
  ShapeDraw d;
  d.radius = minhw * rng.uniformf(0.24f, 0.42f);
  float margin = d.radius * 0.8f;
  d.cx = margin + rng.uniformf() * std::max(0.0f, float(W) - 2 * margin);
  d.cy = margin + rng.uniformf() * std::max(0.0f, float(H) - 2 * margin);
  float rot = rng.uniformf(0.0f, 6.2831853f);
  d.cr = std::cos(rot) / d.radius;
  d.sr = std::sin(rot) / d.radius;
  // Hue: the class's, jittered; a quarter of the samples get any hue, so colour alone
  // does not give the class away.
  float hue = fam.hue + 0.05f * float(rng.normal());
  if (rng.uniformf() < 0.25f) hue = rng.uniformf();
  d.fg = hsv(hue, rng.uniformf(0.5f, 1.0f), rng.uniformf(0.55f, 1.0f));
  d.freq = fam.freq * rng.uniformf(0.85f, 1.15f);
  d.x0 = std::max(0, int(d.cx - d.radius - 2));
  d.x1 = std::min(W, int(d.cx + d.radius + 3));
  d.y0 = std::max(0, int(d.cy - d.radius - 2));
  d.y1 = std::min(H, int(d.cy + d.radius + 3));

  // A distractor disc of random colour, half of the time (drawn under the object).
  bool distract = rng.uniformf() < 0.5f;
  ShapeDraw dd;
  dd.radius = minhw * rng.uniformf(0.06f, 0.12f);
  dd.cx = rng.uniformf() * float(W);
  dd.cy = rng.uniformf() * float(H);
  dd.cr = 1.0f / dd.radius;
  dd.sr = 0.0f;
  dd.fg = hsv(rng.uniformf(), rng.uniformf(0.2f, 1.0f), rng.uniformf(0.3f, 1.0f));
  dd.freq = 1.0f;
  dd.x0 = std::max(0, int(dd.cx - dd.radius - 2));
  dd.x1 = std::min(W, int(dd.cx + dd.radius + 3));
  dd.y0 = std::max(0, int(dd.cy - dd.radius - 2));
  dd.y1 = std::min(H, int(dd.cy + dd.radius + 3));
  if (distract) composite<0, 0>(cv, dd);

  composite_fn(fam.shape, fam.texture)(cv, d);
  quantize(cv, C, float(spec_.pixel_noise) * 255.0f, uint32_t(rng.next()), image);
}

void SyntheticGenerator::draw_outlier(uint64_t seed, uint8_t* image) const {
  const int H = spec_.height, W = spec_.width, C = spec_.channels;
  const float minhw = float(std::min(H, W));
  Rng rng(seed);
  Canvas cv = canvas(H, W);
  const int n = H * W;
  if (rng.below(2) == 0) {
    // Static: independent random colour per pixel (with a random overall tint).
    Rgb tint = hsv(rng.uniformf(), rng.uniformf(0.0f, 0.6f), 1.0f);
    uint32_t key = uint32_t(rng.next());
    for (int i = 0; i < n; ++i) {
      cv.p[0][i] = tint.r * float(hash32(key + uint32_t(3 * i) * 0x9e3779b9u) >> 8) * (1.0f / 16777216.0f);
      cv.p[1][i] = tint.g * float(hash32(key + uint32_t(3 * i + 1) * 0x9e3779b9u) >> 8) * (1.0f / 16777216.0f);
      cv.p[2][i] = tint.b * float(hash32(key + uint32_t(3 * i + 2) * 0x9e3779b9u) >> 8) * (1.0f / 16777216.0f);
    }
    quantize(cv, C, 0.0f, 0, image);
    return;
  }
  // Soft blobs: a few large Gaussian colour blobs on a flat grey.
  float grey = rng.uniformf(0.2f, 0.8f);
  for (int c = 0; c < 3; ++c) std::fill(cv.p[c], cv.p[c] + n, grey);
  int nb = 3 + int(rng.below(4));
  for (int b = 0; b < nb; ++b) {
    float s = minhw * rng.uniformf(0.08f, 0.25f);
    float bx = rng.uniformf() * float(W), by = rng.uniformf() * float(H), inv = 1.0f / (2 * s * s);
    Rgb col = hsv(rng.uniformf(), rng.uniformf(0.3f, 1.0f), rng.uniformf(0.3f, 1.0f));
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        float ex = float(x) + 0.5f - bx, ey = float(y) + 0.5f - by;
        float a = std::exp(-(ex * ex + ey * ey) * inv);
        size_t i = size_t(y) * W + x;
        cv.p[0][i] += (col.r - cv.p[0][i]) * a;
        cv.p[1][i] += (col.g - cv.p[1][i]) * a;
        cv.p[2][i] += (col.b - cv.p[2][i]) * a;
      }
  }
  quantize(cv, C, float(spec_.pixel_noise) * 255.0f, uint32_t(rng.next()), image);
}

}  // namespace sieve::data
