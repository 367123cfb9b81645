// The bf16-weight kernels behind cpu_matmul.h; only cpu_matmul.cc calls them
// (cpu_matmul_shared.h has what they share with the f32/f16 kernels).
//
// A bf16 row is read 16 values (32 bytes) at a time. Each 32-bit word holds columns 2i (low
// half) and 2i+1 (high half), so a shift gives the even columns as f32 and a mask the odd ones,
// with no shuffle: a widening load's shuffles would hold bf16 decode below memory speed.
// X is packed once per product to match: per 16-column block, its 8 even columns then its 8 odd.
//
// Summation order of every output element (all kernels, both instruction sets, any T): lane i
// takes columns 16b+2i then 16b+2i+1, block after block, in one running sum; then the fixed
// 8-lane tree; then the k % 16 tail in column order. So bf16 products are batch-invariant like
// the others (cpu_matmul.h), in an order of their own.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/cpu_matmul_shared.h"
#include "model/weights.h"

namespace pdserve::model::bf16 {

// How far ahead decode's bf16 weight streams prefetch. Splitting bf16 words puts enough work
// between the loads that the hardware prefetchers fall behind; the distance follows the paired
// runs in docs/benchmarks.md (Decode and prefill throughput). The f32 and f16 streams do not
// prefetch: it does not help them (same section).
constexpr int kStreamPrefetchBytes = 2048;

// X in the even/odd order: per row (AVX2 kernels), or per pair of rows side by side in 16-lane
// registers (AVX-512 kernels, T > 1).
struct PackedX {
  CacheLineFloats data;
  size_t stride = 0;  // floats from one row (or pair) to the next
  bool pairs = false;
};

void Pack(const float* x, int t, int ldx, int k, bool pairs, PackedX* out);

// Rows [n0, n1) of w (bf16) against all T rows of X into y (pointing at column n0); y += when
// `add`. `x` is the unpacked X, read for the k % 16 tail. Decode (T = 1) has StreamRuns.
void Rows(const PackedX& xp, const float* x, int t, int ldx, const Matrix& w, bool add, int n0,
          int n1, float* y, int ldy);

// Decode (T = 1, X packed per row): `count` (1 to kMaxStreams) runs of w walked side by side,
// one row of each at a time, in the same order as Rows; y += when `add`.
void StreamRuns(const PackedX& xp, const float* x, const Matrix& w, const RowRun* runs, int count,
                bool add);

// One row of X against row `row` of w, in the same order.
float DotRow(const float* x, const Matrix& w, int row);

}  // namespace pdserve::model::bf16
