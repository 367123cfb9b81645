// What the CPU matrix kernels of cpu_matmul_f32.cc and cpu_matmul_bf16.cc share: packed-X
// storage, the L2 block and the panel order's bound, the panel walk, decode's stream dispatch
// and unit of work. Only the cpu_matmul*.cc files include it (through their kernel headers).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include <boost/align/aligned_allocator.hpp>

#include "model/row_split.h"
#include "model/weights.h"

namespace pdserve::model {

// Packed X for the kernels, 64-byte aligned: a 16-lane load from a 16-byte-aligned vector
// straddles two cache lines three times in four.
using CacheLineFloats = std::vector<float, boost::alignment::aligned_allocator<float, 64>>;

// W rows per block that the T > 1 kernels keep in L2 while every group of a prompt's X rows
// passes over it (decode batches walk panels instead, below), and the rows of a thread's piece
// of any T > 1 product: about 256 KB, rounded up to a multiple of 24 rows (every micro-kernel
// shape divides 24). Rounding down made prefill 8-10% slower at 2,048 tokens a step: a K = 2048
// block of 24 rows means a pass over all of X (16 MB there) per 24 rows, against one per 48.
inline int L2BlockRows(size_t row_bytes) {
  const size_t rows = 256 * 1024 / std::max<size_t>(1, row_bytes);
  return static_cast<int>(std::max<size_t>(24, (rows + 23) / 24 * 24));
}

// X up to this size (T rows of K floats, a decode batch) passes over each small panel of W rows
// before the next panel; larger X (a prompt) over each L2 block of W rows (L2BlockRows). Panels:
// W streams from memory once and evenly, each panel used by all of X while it is in L1 (L2 for
// the longest rows), and the next one goes to L2 meanwhile; X stays in L2. AVX-512 kernels only.
constexpr size_t kPanelOrderXBytes = 256 * 1024;

// Whether T rows of X (K columns) take the panel order (ForEachPanel) in both files' AVX-512
// kernels, rather than the block order.
inline bool PanelOrderFits(int t, int k) {
  return static_cast<size_t>(t) * k * sizeof(float) <= kPanelOrderXBytes;
}

// The panel walk of both files' T > 1 AVX-512 kernels: W rows [n0, n1) in panels of kRows (the
// last rows one at a time), and for each panel every one of `groups` X row groups, through
// call(n, rows, group, slice, lines). Meanwhile the next panel (past n1 too: a thread's next
// piece usually starts there) goes to L2, a slice of its 64-byte lines per call: the first
// `kernel_lines` of a slice are left to the call (`slice`, `lines`; slice is null when there
// are none), and the rest are prefetched here, before the call.
template <int kRows, typename Call>
inline void ForEachPanel(const Matrix& w, size_t row_bytes, int n0, int n1, int groups,
                         int kernel_lines, const Call& call) {
  const auto* base = static_cast<const char*>(w.data);
  for (int n = n0; n < n1;) {
    const int rows = n1 - n >= kRows ? kRows : 1;
    const int next_rows = std::clamp(w.rows - (n + rows), 0, kRows);
    const int next_lines = static_cast<int>(next_rows * row_bytes / 64);
    const int lines_per_call = (next_lines + groups - 1) / groups;
    for (int g = 0; g < groups; ++g) {
      const int first = g * lines_per_call;
      const int lines = std::clamp(next_lines - first, 0, lines_per_call);
      const char* slice = lines > 0 ? base + (n + rows) * row_bytes + first * 64 : nullptr;
      for (int line = kernel_lines; line < lines; ++line) {
        _mm_prefetch(slice + line * 64, _MM_HINT_T1);
      }
      call(n, rows, g, slice, std::min(lines, kernel_lines));
    }
    n += rows;
  }
}

// f.template operator()<S>() with S = count (1 to kMaxStreams) as a compile-time constant: the
// stream kernels of both files are instantiated per stream count.
template <typename F>
void WithStreamCount(int count, const F& f) {
  static_assert(kMaxStreams == 4);
  switch (count) {
    case 4:
      return f.template operator()<4>();
    case 3:
      return f.template operator()<3>();
    case 2:
      return f.template operator()<2>();
    default:
      return f.template operator()<1>();
  }
}

// Decode's (T = 1) unit of work in both files: W rows [n0, n1), outputs to y[0 .. n1 - n0).
struct RowRun {
  int n0 = 0, n1 = 0;
  float* y = nullptr;
};

}  // namespace pdserve::model
