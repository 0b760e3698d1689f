// The interactive t-SNE view: one self-contained HTML page (inline CSS, JS and JSON; no
// network, no libraries) that draws the embedding on a <canvas>, colours points by class,
// marks DBSCAN noise with black crosses, and on hover shows the sample's thumbnail, label,
// class name, cluster and noise flag. Classes and noise can be toggled from the legend.
//
// Thumbnails: raw pixels of a capped sample of points (noise points first, then an even
// stride over the rest), read from the dataset by sample_id, downsampled to at most 48 px,
// stored base64 in the page's JSON and painted with putImageData — no image files needed,
// so the page works when opened straight from disk (file://).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sieve::report {

struct ScatterPoint {
  float x = 0, y = 0;
  int32_t label = 0;
  int32_t cluster = 0;  // -1: noise (or no filter: 0)
  bool noise = false;
  int64_t sample_id = 0;
};

struct InteractiveOptions {
  int64_t max_points = 20000;  // larger embeddings are subsampled (noise always kept)
  int64_t max_thumbnails = 2000;
  std::string dataset_path;  // "" or a sieve.dataset/1 file with /train/images
  std::string title;
};

// Writes the page to `path`; returns the number of points drawn.
int64_t write_interactive(const std::string& path, const std::vector<ScatterPoint>& points,
                          const std::vector<std::string>& class_names,
                          const InteractiveOptions& opt);

std::string base64(const uint8_t* data, size_t n);

}  // namespace sieve::report
