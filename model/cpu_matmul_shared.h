// What the CPU matrix kernels of cpu_matmul_f32.cc and cpu_matmul_bf16.cc share: packed-X
// storage, the L2 block and the panel order's bound, the panel walk, decode's stream dispatch
// and unit of work. Only the cpu_matmul*.cc files include it (through their kernel headers), and
// its test.
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
// shape divides 24), not down: a K = 2048 block of 24 rows means a pass over all of X (16 MB
// there) per 24 rows, against one per 48 (docs/benchmarks.md, Decode and prefill throughput).
inline int L2BlockRows(size_t row_bytes) {
  const size_t rows = 256 * 1024 / std::max<size_t>(1, row_bytes);
  return static_cast<int>(std::max<size_t>(24, (rows + 23) / 24 * 24));
}

// X up to this size (T rows of K floats, a decode batch) passes over each small panel of W rows
// before the next panel; larger X (a prompt) over each L2 block of W rows (L2BlockRows). Panels:
// W streams from memory once and evenly, each panel used by all of X while it is in L1 (L2 for
// the longest rows), and the next ones go to L2 meanwhile; X stays in L2. AVX-512 kernels only.
constexpr size_t kPanelOrderXBytes = 256 * 1024;

// Whether T rows of X (K columns) take the panel order (ForEachPanel) in both files' AVX-512
// kernels, rather than the block order.
inline bool PanelOrderFits(int t, int k) {
  return static_cast<size_t>(t) * k * sizeof(float) <= kPanelOrderXBytes;
}

// The 64-byte lines of W that one kernel call sends to L2: line b (b < count) at
// starts[b % kStreams] + (b / kStreams) * step, none where that start is null. Starts a step
// apart make kStreams streams taken a line of each in turn (ForEachPanel); Run makes one
// sequential run.
struct PrefetchLines {
  static constexpr int kStreams = 4;

  const char* starts[kStreams] = {};
  size_t step = 0;
  int count = 0;

  // `count` lines from `first` on, one after the other.
  static PrefetchLines Run(const char* first, int count) {
    PrefetchLines p;
    for (int s = 0; s < kStreams && first != nullptr; ++s) p.starts[s] = first + 64 * s;
    p.step = kStreams * 64;
    p.count = count;
    return p;
  }

  // Line b's address, or null for none.
  __attribute__((always_inline)) const char* Address(int b) const {
    const auto line = static_cast<unsigned>(b);  // unsigned: a mask and a shift, no sign fix
    const char* start = starts[line % kStreams];
    return start != nullptr ? start + static_cast<size_t>(line / kStreams) * step : nullptr;
  }

  // Sends line b.
  __attribute__((always_inline)) void Fetch(int b) const {
    if (const char* line = Address(b)) _mm_prefetch(line, _MM_HINT_T1);
  }
};

// The panel walk of both files' T > 1 AVX-512 kernels: W rows [n0, n1) in panels of kRows (the
// last rows one at a time), and for each panel every one of `groups` X row groups, through
// call(n, rows, group, prefetch). Meanwhile the next S = PrefetchLines::kStreams (four) panels
// (past n1 too: a thread's next piece usually starts there) go to L2 as S streams, a line of
// each in turn: the panel s ahead (s = 1..S) gets its part S - s of S, so each panel is whole
// by the time it comes. The L2 streamer runs ahead of each stream it sees, so S streams keep
// more lines in flight than the next panel alone (docs/benchmarks.md, Decode and prefill
// throughput). Of a call's lines, the first `kernel_lines` are left to the call (prefetch.count
// says how many), and the rest are sent here before it.
template <int kRows, typename Call>
inline void ForEachPanel(const Matrix& w, size_t row_bytes, int n0, int n1, int groups,
                         int kernel_lines, const Call& call) {
  const auto* base = static_cast<const char*>(w.data);
  constexpr int kStreams = PrefetchLines::kStreams;
  const int panel_lines = static_cast<int>(kRows * row_bytes / 64);
  const int part = (panel_lines + kStreams - 1) / kStreams;  // of a panel, for one panel-time
  const int per_call = (part + groups - 1) / groups;
  for (int n = n0; n < n1;) {
    const int rows = n1 - n >= kRows ? kRows : 1;
    for (int g = 0; g < groups; ++g) {
      const int first = g * per_call;  // of each part
      const int lines = std::clamp(part - first, 0, per_call);
      PrefetchLines prefetch;
      prefetch.step = 64;
      prefetch.count = kStreams * lines;
      for (int s = 1; s <= kStreams; ++s) {
        const int panel = n + rows + (s - 1) * kRows;
        const int line = (kStreams - s) * part + first;
        // Only panels inside the matrix, and lines inside the panel.
        if (lines > 0 && panel + kRows <= w.rows && line + lines <= panel_lines) {
          prefetch.starts[s - 1] = base + panel * row_bytes + static_cast<size_t>(line) * 64;
        }
      }
      for (int b = kernel_lines; b < prefetch.count; ++b) prefetch.Fetch(b);
      prefetch.count = std::min(prefetch.count, kernel_lines);
      call(n, rows, g, prefetch);
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
