// The f32- and f16-weight kernels behind cpu_matmul.h (f16 converted to f32 in registers, never
// copied); only cpu_matmul.cc calls them. cpu_matmul_bf16.h has the bf16 kernels,
// cpu_matmul_shared.h what both share.
//
// Summation order of every output element (all kernels, both instruction sets, any T): 8 lanes
// over k, then the fixed tree of simd.h's HorizontalSum, then the k % 8 tail in order. The
// AVX-512 kernels (T > 1) keep it by putting two X rows side by side in one 16-lane register,
// each half summing its own 8 lanes.
#pragma once

#include <cstddef>

#include "model/cpu_matmul_shared.h"
#include "model/weights.h"

namespace pdserve::model::f32 {

// X rows in pairs for the AVX-512 kernels (T > 1), in groups of kGroupPairs pairs, so that a
// kernel call reads its X as one stream: group g starts at g * kGroupPairs * pair_stride; inside
// it, for 8-column block b, each of the group's m pairs (m = kGroupPairs but in the last group)
// has 16 floats at (b * m + slot) * 16: row 2p's columns [8b, 8b+8), then row 2p+1's (zeros past
// the last row). Only whole blocks; the k % 8 tail is read from X itself.
constexpr int kGroupPairs = 4;

struct PackedPairs {
  CacheLineFloats data;
  size_t pair_stride = 0;  // floats per pair: a group of m pairs takes m * pair_stride
};

// Packs rows [0, t) of x (k8 whole 8-column blocks) into `out`.
void PackPairs(const float* x, int t, int ldx, int k8, PackedPairs* out);

// Rows [n0, n1) of w (f32 or f16) against all T rows of X into y (pointing at column n0); y +=
// when `add`. With `pairs` (X packed, T > 1 on AVX-512) the AVX-512 kernels, else AVX2.
void Rows(const PackedPairs* pairs, const float* x, int t, int ldx, const Matrix& w, bool add,
          int n0, int n1, float* y, int ldy);

// Decode (T = 1): `count` (1 to kMaxStreams) runs of w walked side by side, one row of each at a
// time, in the same order as Rows; y += when `add`.
void StreamRuns(const float* x, const Matrix& w, const RowRun* runs, int count, bool add);

// One row of X against row `row` of w, in the same order.
float DotRow(const float* x, const Matrix& w, int row);

}  // namespace pdserve::model::f32
