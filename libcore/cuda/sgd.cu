// The optimizer step of the CUDA backend (nn/backend.hpp: sum, sgd_norms, sgd_apply): the
// element arithmetic of nn/sgd.hpp as kernels on the backend's stream.
//
// How the work is cut: into chunks of kChunk elements that never cross a tensor. Block b of
// a launch takes one chunk of one range (a term, or for sgd_apply a run of plain elements
// between terms), found by a binary search in a small table of ranges uploaded per call,
// each range knowing the index of its first block. So
//   * one launch covers every tensor (ResNet-18 has 62, a deep model thousands) instead of
//     one launch per tensor, and no block is idle or overloaded: a 1-element bias gets one
//     block, a 2.4M-element convolution 576;
//   * the reductions are deterministic: each block adds its chunk in a fixed order into one
//     partial sum, and a second kernel adds a range's partials in block order. The chunking
//     depends on the sizes only, not on the GPU, so the sums are the same on every device;
//     they differ from the host's sequential double sums in the last bits only;
//   * sgd_apply runs the five passes of nn/sgd.hpp in ONE pass over the buffers: each element
//     belongs to one thread, which does steps 1..5 in order on its registers (steps 3 and 5
//     read only the element's own values, so fusing changes no arithmetic). The arithmetic
//     uses the explicitly rounded intrinsics (__fmul_rn, __fadd_rn, __fsub_rn), which nvcc
//     never contracts into an FMA: every element gets the operations sgd.hpp writes, each
//     rounded once. Fusing needs the terms disjoint, which they are (one per tensor);
//     overlapping terms are refused rather than computed otherwise than on the host.
// The tables and partial sums live in the backend's workspace (valid for the op running now).
// A table goes up with the backend's to_device, which waits for the stream: an asynchronous
// copy from pageable memory is not documented to have read its source when it returns. The
// wait costs little where it sits: sum and sgd_norms wait for their results anyway, and the
// trainer calls them (the non-finite check, the LARS norms) right before sgd_apply.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <vector>

#include "cuda/backend_cuda.hpp"
#include "cuda/cuda_check.hpp"

namespace sieve::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kChunk = size_t(kThreads) * 16;  // elements per block
constexpr size_t kTableAlign = 256;

__host__ __device__ inline size_t blocks_for(size_t count) {
  return (count + kChunk - 1) / kChunk;
}

// A run [offset, offset + count) of the buffers, done by the blocks
// [first_block, first_block + blocks_for(count)).
struct Range {
  size_t offset = 0, count = 0;
  unsigned first_block = 0;
};

// A range of sgd_apply with the terms of its elements (plain for the runs between terms).
struct Segment {
  size_t offset = 0, count = 0;
  unsigned first_block = 0;
  nn::SgdTerm::Kind kind = nn::SgdTerm::Kind::plain;
  float l2 = 0.f, trust = 1.f;
  float decoupled = 0.f, decay = 0.f;  // decay = lr * decoupled, as the host computes it
};

// The range block `b` works on: the last one with first_block <= b. A range without blocks
// (count 0) shares its first_block with the next range, so the last such one has blocks.
template <typename R>
__device__ int find_range(const R* ranges, int n, unsigned b) {
  int lo = 0, hi = n - 1;  // ranges[0].first_block == 0 <= b
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (ranges[mid].first_block <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The sums of a and b over the block (blockDim.x == kThreads), in a fixed order; valid in
// thread 0. Every thread of the block must call it.
__device__ double2 block_sum2(double a, double b) {
  __shared__ double2 warp_sums[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) {
    a += __shfl_down_sync(0xffffffffu, a, o);
    b += __shfl_down_sync(0xffffffffu, b, o);
  }
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = make_double2(a, b);
  __syncthreads();
  double2 total = make_double2(0.0, 0.0);
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / 32; ++w) total.x += warp_sums[w].x, total.y += warp_sums[w].y;
  return total;
}

// Pass 1 of the range sums: partials[b] = the sums over block b's chunk of
//   kSquares: (x*x, y*y) (the norms);   otherwise: (x, 0) (the plain sum; y unused).
template <bool kSquares>
__global__ void partial_sums_kernel(const float* x, const float* y, const Range* ranges, int n,
                                    double2* partials) {
  const unsigned b = blockIdx.x;
  const Range r = ranges[find_range(ranges, n, b)];
  const size_t begin = size_t(b - r.first_block) * kChunk;
  const size_t end = begin + kChunk < r.count ? begin + kChunk : r.count;
  double sx = 0.0, sy = 0.0;
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double xv = x[r.offset + i];
    if constexpr (kSquares) {
      const double yv = y[r.offset + i];
      sx += xv * xv;
      sy += yv * yv;
    } else {
      sx += xv;
    }
  }
  const double2 total = block_sum2(sx, sy);
  if (threadIdx.x == 0) partials[b] = total;
}

// Pass 2: sums[t] = the partials of range t's blocks, added in block order by each thread,
// then over the block. One block per range (a range without blocks sums to 0).
__global__ void range_sums_kernel(const Range* ranges, const double2* partials, double2* sums) {
  const Range r = ranges[blockIdx.x];
  const size_t nb = blocks_for(r.count);
  double sx = 0.0, sy = 0.0;
  for (size_t j = threadIdx.x; j < nb; j += blockDim.x) {
    const double2 p = partials[r.first_block + j];
    sx += p.x;
    sy += p.y;
  }
  const double2 total = block_sum2(sx, sy);
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

// nn/sgd.hpp's steps 1..5 for the elements of block b's chunk.
__global__ void sgd_apply_kernel(const Segment* segs, int n, float* w, const float* grads, float* v,
                                 float* scratch, float lr, float mu, bool nesterov) {
  const unsigned b = blockIdx.x;
  const Segment s = segs[find_range(segs, n, b)];
  const size_t first = size_t(b - s.first_block) * kChunk;
  const size_t begin = s.offset + first;
  const size_t end = s.offset + (first + kChunk < s.count ? first + kChunk : s.count);
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float wi = w[i];
    // 1. the gradient; 2. the term's coefficient
    float g = grads[i];
    if (s.kind == nn::SgdTerm::Kind::lars)
      g = __fmul_rn(s.trust, __fadd_rn(g, __fmul_rn(s.l2, wi)));
    else if (s.kind == nn::SgdTerm::Kind::l2)
      g = __fadd_rn(g, __fmul_rn(s.l2, wi));
    // 3. momentum
    const float vi = __fadd_rn(__fmul_rn(mu, v[i]), g);
    v[i] = vi;
    g = nesterov ? __fadd_rn(g, __fmul_rn(mu, vi)) : vi;
    if (scratch) scratch[i] = g;  // null: nobody reads g (the device home passes none)
    // 4. decoupled decay; 5. the step
    float wn = wi;
    if (s.decoupled != 0.f) wn = __fsub_rn(wn, __fmul_rn(s.decay, wn));
    w[i] = __fsub_rn(wn, __fmul_rn(lr, g));
  }
}

size_t align_up(size_t bytes) {
  return (bytes + kTableAlign - 1) / kTableAlign * kTableAlign;
}

// Numbers the blocks of each range (first_block) and returns how many there are.
template <typename R>
unsigned assign_blocks(std::vector<R>& ranges) {
  size_t blocks = 0;
  for (R& r : ranges) {
    r.first_block = unsigned(blocks);
    blocks += blocks_for(r.count);
    SIEVE_CHECK(blocks <= size_t(INT_MAX), "SGD kernels: ", blocks, " blocks exceed a grid");
  }
  return unsigned(blocks);
}

// The sums of range_sums_kernel for each range, on the host (waits for the stream).
std::vector<double2> range_sums(CudaBackend& be, const float* x, const float* y, bool squares,
                                std::vector<Range>& ranges) {
  std::vector<double2> sums(ranges.size(), make_double2(0.0, 0.0));
  const unsigned blocks = assign_blocks(ranges);
  if (ranges.empty() || blocks == 0) return sums;
  const size_t table_bytes = align_up(ranges.size() * sizeof(Range));
  const size_t partial_bytes = align_up(blocks * sizeof(double2));
  char* ws = static_cast<char*>(be.workspace(table_bytes + partial_bytes + sums.size() * 16));
  auto* table = reinterpret_cast<Range*>(ws);
  auto* partials = reinterpret_cast<double2*>(ws + table_bytes);
  auto* out = reinterpret_cast<double2*>(ws + table_bytes + partial_bytes);
  be.to_device(table, ranges.data(), ranges.size() * sizeof(Range));
  const int n = int(ranges.size());
  if (squares)
    partial_sums_kernel<true><<<blocks, kThreads, 0, be.stream()>>>(x, y, table, n, partials);
  else
    partial_sums_kernel<false><<<blocks, kThreads, 0, be.stream()>>>(x, y, table, n, partials);
  SIEVE_CUDA_CHECK_LAUNCH();
  range_sums_kernel<<<n, kThreads, 0, be.stream()>>>(table, partials, out);
  SIEVE_CUDA_CHECK_LAUNCH();
  be.to_host(sums.data(), out, sums.size() * sizeof(double2));
  return sums;
}

// The segments of [0, total): the terms by offset (empty ones dropped) and plain runs between
// them. Terms must lie in [0, total) (as nn::sgd_apply_host asserts) and must not overlap.
std::vector<Segment> segments(size_t total, const nn::SgdTerm* terms, size_t n,
                              const nn::SgdStep& s) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return terms[a].offset < terms[b].offset; });
  std::vector<Segment> out;
  size_t at = 0;  // end of the last segment
  for (size_t k : order) {
    const nn::SgdTerm& t = terms[k];
    SIEVE_ASSERT(t.offset <= total && t.count <= total - t.offset, "SGD term at ", t.offset,
                 " outside [0, ", total, ")");
    if (t.count == 0) continue;
    SIEVE_ASSERT(t.offset >= at, "SGD terms overlap at ", t.offset, " (the device step needs ",
                 "disjoint terms, one per tensor)");
    if (t.offset > at) out.push_back({at, t.offset - at});
    Segment seg{t.offset, t.count, 0, t.kind, t.l2, t.trust, t.decoupled, 0.f};
    if (t.decoupled != 0.f) seg.decay = s.lr * t.decoupled;
    out.push_back(seg);
    at = t.offset + t.count;
  }
  if (at < total) out.push_back({at, total - at});
  return out;
}

}  // namespace

double CudaBackend::sum(const float* x, size_t count) {
  if (count == 0) return 0.0;
  std::vector<Range> whole{{0, count, 0}};
  return range_sums(*this, x, nullptr, false, whole)[0].x;
}

void CudaBackend::sgd_norms(const float* params, const float* grads, const nn::SgdTerm* terms,
                            size_t n, double* norms) {
  std::vector<size_t> lars;  // the terms measured, in the order of `ranges`
  std::vector<Range> ranges;
  for (size_t k = 0; k < n; ++k) {
    if (terms[k].kind != nn::SgdTerm::Kind::lars) continue;
    lars.push_back(k);
    ranges.push_back({terms[k].offset, terms[k].count, 0});
  }
  if (lars.empty()) return;
  const std::vector<double2> sums = range_sums(*this, params, grads, true, ranges);
  for (size_t j = 0; j < lars.size(); ++j) {
    norms[2 * lars[j]] = std::sqrt(sums[j].x);
    norms[2 * lars[j] + 1] = std::sqrt(sums[j].y);
  }
}

void CudaBackend::sgd_apply(const nn::SgdBuffers& b, size_t total, const nn::SgdTerm* terms,
                            size_t n, const nn::SgdStep& s) {
  if (total == 0) return;
  std::vector<Segment> segs = segments(total, terms, n, s);
  const unsigned blocks = assign_blocks(segs);
  const size_t table_bytes = segs.size() * sizeof(Segment);
  auto* table = static_cast<Segment*>(workspace(table_bytes));
  to_device(table, segs.data(), table_bytes);
  sgd_apply_kernel<<<blocks, kThreads, 0, stream()>>>(table, int(segs.size()), b.params, b.grads,
                                                      b.velocity, b.scratch, s.lr, s.momentum,
                                                      s.nesterov);
  SIEVE_CUDA_CHECK_LAUNCH();
}

}  // namespace sieve::cuda
