#include "report/interactive.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "io/atomic_output.hpp"
#include "io/h5.hpp"
#include "io/metrics.hpp"
#include "report/document.hpp"

namespace sieve::report {

std::string base64(const uint8_t* d, size_t n) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = uint32_t(d[i]) << 16;
    if (i + 1 < n) v |= uint32_t(d[i + 1]) << 8;
    if (i + 2 < n) v |= uint32_t(d[i + 2]);
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < n ? k[(v >> 6) & 63] : '=';
    out += i + 2 < n ? k[v & 63] : '=';
  }
  return out;
}

namespace {

// Which points to draw: all noise, then an even stride over the others up to max_points.
std::vector<size_t> choose(const std::vector<ScatterPoint>& pts, int64_t max_points) {
  std::vector<size_t> noise, rest;
  for (size_t i = 0; i < pts.size(); ++i) (pts[i].noise ? noise : rest).push_back(i);
  std::vector<size_t> out = noise;
  int64_t room = std::max<int64_t>(0, max_points - int64_t(noise.size()));
  if (int64_t(rest.size()) <= room) {
    out.insert(out.end(), rest.begin(), rest.end());
  } else {
    for (int64_t j = 0; j < room; ++j) out.push_back(rest[size_t(j * int64_t(rest.size()) / room)]);
  }
  return out;
}

struct Thumbs {
  int h = 0, w = 0, c = 0;
  std::vector<std::string> data;  // base64 of h*w*c bytes
};

// Thumbnails of the first `count` chosen points, from the dataset's /train/images.
Thumbs read_thumbs(const std::string& dataset, const std::vector<ScatterPoint>& pts,
                   const std::vector<size_t>& chosen, size_t count, std::vector<int>& index) {
  Thumbs t;
  index.assign(chosen.size(), -1);
  if (dataset.empty() || count == 0) return t;
  auto f = h5::File::open(dataset);
  if (!f.exists("/train/images")) return t;
  auto dims = f.require<uint8_t>("/train/images", 4);
  auto ids = f.read_all<int64_t>("/train/sample_id");
  std::map<int64_t, hsize_t> row_of;
  for (size_t r = 0; r < ids.size(); ++r) row_of[ids[r]] = r;
  const int H = int(dims[1]), W = int(dims[2]), C = int(dims[3]);
  const int step = std::max(1, std::max(H, W) / 48 + (std::max(H, W) % 48 ? 1 : 0));
  t.h = (H + step - 1) / step, t.w = (W + step - 1) / step, t.c = C;
  std::vector<uint8_t> img(size_t(H) * W * C), small(size_t(t.h) * t.w * C);
  for (size_t j = 0; j < chosen.size() && t.data.size() < count; ++j) {
    auto it = row_of.find(pts[chosen[j]].sample_id);
    if (it == row_of.end()) continue;
    f.read_rows<uint8_t>("/train/images", it->second, 1, img.data());  // [H, W, C]
    for (int y = 0; y < t.h; ++y)
      for (int x = 0; x < t.w; ++x)
        for (int ch = 0; ch < C; ++ch)
          small[(size_t(y) * t.w + x) * C + ch] = img[(size_t(y * step) * W + x * step) * C + ch];
    index[j] = int(t.data.size());
    t.data.push_back(base64(small.data(), small.size()));
  }
  return t;
}

const char* kPage = R"PAGE(<style>
body{font-family:sans-serif;margin:1em;color:#222}
#wrap{display:flex;gap:1em;align-items:flex-start}
#tsne-canvas{border:1px solid #ccc;cursor:crosshair}
#legend label{display:block;font-size:13px;white-space:nowrap}
#legend .sw{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:middle}
#tip{position:fixed;display:none;background:#fff;border:1px solid #888;padding:6px;
font-size:12px;pointer-events:none;box-shadow:2px 2px 6px #999}
#tip canvas{display:block;image-rendering:pixelated;margin-bottom:4px;border:1px solid #ddd}
</style>
</head><body>
<h1 id="title"></h1>
<p id="status">loading…</p>
<div id="wrap"><canvas id="tsne-canvas" width="820" height="820"></canvas>
<div id="legend"></div></div>
<div id="tip"><canvas id="thumb" width="96" height="96"></canvas><div id="tiptext"></div></div>
<script>
"use strict";
const D = JSON.parse(document.getElementById("points-data").textContent);
const P = D.points, N = P.x.length;
document.getElementById("title").textContent = D.title;
const base = ["#1f77b4","#ff7f0e","#2ca02c","#d62728","#9467bd","#8c564b","#e377c2",
              "#7f7f7f","#bcbd22","#17becf"];
function color(k) { return k < base.length ? base[k] : "hsl(" + ((k * 137.5) % 360) + ",65%,45%)"; }
const K = D.classes.length;
const shown = new Array(K).fill(true);
let showNoise = true, noiseOnly = false;
const cv = document.getElementById("tsne-canvas"), ctx = cv.getContext("2d");
const W = cv.width, H = cv.height, M = 20;
let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
for (let i = 0; i < N; ++i) {
  x0 = Math.min(x0, P.x[i]); x1 = Math.max(x1, P.x[i]);
  y0 = Math.min(y0, P.y[i]); y1 = Math.max(y1, P.y[i]);
}
const sx = (W - 2 * M) / Math.max(x1 - x0, 1e-9), sy = (H - 2 * M) / Math.max(y1 - y0, 1e-9);
const s = Math.min(sx, sy);
const px = new Float32Array(N), py = new Float32Array(N);
const ox = (W - 2 * M - (x1 - x0) * s) / 2, oy = (H - 2 * M - (y1 - y0) * s) / 2;  // centre
for (let i = 0; i < N; ++i) {
  px[i] = M + ox + (P.x[i] - x0) * s;
  py[i] = H - M - oy - (P.y[i] - y0) * s;
}
function visible(i) {
  if (P.n[i]) return showNoise && shown[P.l[i]] !== false;
  return !noiseOnly && shown[P.l[i]] !== false;
}
// Uniform grid of 16 px cells for hover look-up.
const G = 16, GW = Math.ceil(W / G), GH = Math.ceil(H / G), grid = new Array(GW * GH);
for (let i = 0; i < N; ++i) {
  const c = Math.min(GW - 1, Math.max(0, px[i] / G | 0)) + GW * Math.min(GH - 1, Math.max(0, py[i] / G | 0));
  (grid[c] = grid[c] || []).push(i);
}
function draw() {
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, H);
  let drawn = 0;
  for (let i = 0; i < N; ++i) {
    if (P.n[i] || !visible(i)) continue;
    ctx.fillStyle = color(P.l[i]);
    ctx.beginPath(); ctx.arc(px[i], py[i], 2.5, 0, 2 * Math.PI); ctx.fill(); ++drawn;
  }
  ctx.strokeStyle = "#000"; ctx.lineWidth = 1.5;
  for (let i = 0; i < N; ++i) {  // noise on top
    if (!P.n[i] || !visible(i)) continue;
    ctx.beginPath(); ctx.moveTo(px[i] - 3, py[i] - 3); ctx.lineTo(px[i] + 3, py[i] + 3);
    ctx.moveTo(px[i] + 3, py[i] - 3); ctx.lineTo(px[i] - 3, py[i] + 3); ctx.stroke(); ++drawn;
  }
  cv.dataset.rendered = drawn;
}
const legend = document.getElementById("legend");
function addToggle(html, checked, on) {
  const lab = document.createElement("label");
  const box = document.createElement("input");
  box.type = "checkbox"; box.checked = checked;
  box.addEventListener("change", () => { on(box.checked); draw(); });
  lab.appendChild(box);
  const span = document.createElement("span"); span.innerHTML = html; lab.appendChild(span);
  legend.appendChild(lab);
}
function esc(t) { const d = document.createElement("div"); d.textContent = t; return d.innerHTML; }
for (let k = 0; k < K; ++k)
  addToggle('<span class="sw" style="background:' + color(k) + '"></span>' + esc(D.classes[k]),
            true, v => { shown[k] = v; });
addToggle("<b>&times;</b> flagged as noise (" + D.noise_count + ")", true, v => { showNoise = v; });
addToggle("noise only", false, v => { noiseOnly = v; });
const tip = document.getElementById("tip"), tipText = document.getElementById("tiptext");
const thumb = document.getElementById("thumb"), tctx = thumb.getContext("2d");
const T = D.thumbs;
function showThumb(t) {
  if (t < 0 || !T.data.length) { thumb.style.display = "none"; return; }
  const raw = atob(T.data[t]), img = tctx.createImageData(T.w, T.h);
  for (let p = 0; p < T.w * T.h; ++p) {
    for (let c = 0; c < 3; ++c) img.data[4 * p + c] = raw.charCodeAt(p * T.c + (T.c === 1 ? 0 : c));
    img.data[4 * p + 3] = 255;
  }
  const off = document.createElement("canvas"); off.width = T.w; off.height = T.h;
  off.getContext("2d").putImageData(img, 0, 0);
  tctx.imageSmoothingEnabled = false;
  tctx.clearRect(0, 0, thumb.width, thumb.height);
  tctx.drawImage(off, 0, 0, thumb.width, thumb.height);
  thumb.style.display = "block";
}
cv.addEventListener("mousemove", ev => {
  const r = cv.getBoundingClientRect();
  const mx = (ev.clientX - r.left) * W / r.width, my = (ev.clientY - r.top) * H / r.height;
  const gx = mx / G | 0, gy = my / G | 0;
  let best = -1, bd = 64;
  for (let a = gx - 1; a <= gx + 1; ++a) for (let b = gy - 1; b <= gy + 1; ++b) {
    if (a < 0 || b < 0 || a >= GW || b >= GH) continue;
    for (const i of grid[a + GW * b] || []) {
      if (!visible(i)) continue;
      const d = (px[i] - mx) ** 2 + (py[i] - my) ** 2;
      if (d < bd) { bd = d; best = i; }
    }
  }
  if (best < 0) { tip.style.display = "none"; return; }
  showTip(best, ev.clientX, ev.clientY);
});
function showTip(i, cx, cy) {
  showThumb(P.t[i]);
  tipText.innerHTML = "sample " + P.id[i] + "<br>label " + P.l[i] + ": " +
      esc(D.classes[P.l[i]] || "?") + "<br>cluster " + P.c[i] +
      (P.n[i] ? "<br><b>flagged as noise</b>" : "");
  tip.style.display = "block";
  tip.style.left = (cx + 14) + "px"; tip.style.top = (cy + 14) + "px";
  tip.dataset.sample = P.id[i];
}
cv.addEventListener("mouseleave", () => { tip.style.display = "none"; });
draw();
// "#hover=<k>" opens the tooltip of drawn point k at load: lets a headless browser check
// (scripts/check_report_browser.sh) screenshot a hover without a mouse.
const hv = /^#hover=(\d+)$/.exec(location.hash);
if (hv && +hv[1] < N) {
  const r = cv.getBoundingClientRect(), k = +hv[1];
  showTip(k, r.left + px[k] * r.width / W, r.top + py[k] * r.height / H);
}
document.getElementById("status").textContent = N + " points (" + D.total_points +
    " in the embedding), " + K + " classes, " + D.noise_count + " noise, " + T.data.length +
    " thumbnails. Hover a point to see its image; toggle classes on the right.";
</script>
</body></html>
)PAGE";

}  // namespace

int64_t write_interactive(const std::string& path, const std::vector<ScatterPoint>& pts,
                          const std::vector<std::string>& class_names,
                          const InteractiveOptions& opt) {
  std::vector<size_t> chosen = choose(pts, opt.max_points);
  std::vector<int> thumb_of;
  Thumbs th = read_thumbs(opt.dataset_path, pts, chosen,
                          size_t(std::max<int64_t>(0, opt.max_thumbnails)), thumb_of);
  Json j;
  j["title"] = opt.title;
  j["classes"] = class_names;
  j["total_points"] = pts.size();
  Json x = Json::array(), y = Json::array(), l = Json::array(), c = Json::array(),
       n = Json::array(), id = Json::array(), t = Json::array();
  int64_t noise = 0;
  for (size_t k = 0; k < chosen.size(); ++k) {
    const ScatterPoint& p = pts[chosen[k]];
    // 4 significant digits are plenty on an 820 px canvas and keep the page small.
    x.push_back(std::round(double(p.x) * 1e3) / 1e3);
    y.push_back(std::round(double(p.y) * 1e3) / 1e3);
    l.push_back(p.label);
    c.push_back(p.cluster);
    n.push_back(p.noise ? 1 : 0);
    id.push_back(p.sample_id);
    t.push_back(thumb_of[k]);
    noise += p.noise;
  }
  j["points"] = {{"x", x}, {"y", y}, {"l", l}, {"c", c}, {"n", n}, {"id", id}, {"t", t}};
  j["noise_count"] = noise;
  j["thumbs"] = {{"w", th.w}, {"h", th.h}, {"c", th.c}, {"data", th.data}};
  std::string json = j.dump();
  // "</" inside a <script> would end it; "<\/" is the same JSON string.
  for (size_t pos = 0; (pos = json.find("</", pos)) != std::string::npos; pos += 3)
    json.replace(pos, 2, "<\\/");
  std::string page =
      cat("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>",
          html_escape(opt.title), "</title>\n",
          "<script type=\"application/json\" id=\"points-data\">", json, "</script>\n", kPage);
  write_text_atomic(path, page);
  return int64_t(chosen.size());
}

}  // namespace sieve::report
