// The CPU engine's matrix products Y[T][N] = X[T][K] · W[N][K]^T, with W in f32, bf16 or f16
// (converted to f32 in registers, never copied) and X, Y in f32; OpenMP threads split N, each
// working through its own share and then stealing from the others' (row_range.h).
// Fused forms save a pass over memory and a thread fork/join each: several products of one X
// (Q, K and V), a product added into Y (the residual stream), SwiGLU's gate and up products
// combined as they are made, and X's rows normalised (RMSNorm) as the products read them.
//
// Batch invariance: every output element is the dot product of one X row and one W row, summed
// in the same order (8 lanes over k, then a fixed tree, then the k % 8 tail; bf16 weights have
// an order of their own, cpu_matmul_bf16.h) whatever T, the blocking, the thread count or the
// instruction set. So a sequence's logits do not depend on what
// else is in its batch, and greedy tokens match bit for bit between one engine, a colocated
// worker and a prefill/decode pair, on AVX2 and AVX-512 machines alike. The AVX-512 kernels
// (T > 1 on CPUs that have it) keep that order by putting two X rows side by side in one
// 16-lane register, each half summing its own 8 lanes.
//
// Call from one thread at a time per output buffer; it uses OpenMP threads internally.
#pragma once

#include <span>

#include "model/weights.h"

namespace pdserve::model {

enum class MatMulStore {
  kSet,  // y = x · w^T
  kAdd,  // y += x · w^T (the add happens after the dot product: y + (x · w))
};

// x: [t][ldx] (first k = w.cols used), y: [t][ldy] (first w.rows written).
void MatMul(const float* x, int t, int ldx, const Matrix& w, float* y, int ldy,
            MatMulStore store = MatMulStore::kSet);

// RMSNorm (rms_norm.h) of each x row, applied as a product reads x: the same bits as
// normalising x first, without a pass of its own. `weight` has k floats.
struct RowNorm {
  const float* weight;
  float eps;
};

// Several products of the same x in one parallel pass; every w has x's k columns. With `norm`,
// the products are of RmsNorm(x) instead.
struct MatMulTarget {
  const Matrix* w;
  float* y;
  int ldy;
};
void MatMulMany(const float* x, int t, int ldx, std::span<const MatMulTarget> targets,
                const RowNorm* norm = nullptr);

// out[r][n] = silu(g) * u, g = (x · gate^T)[r][n], u = (x · up^T)[r][n]; gate and up have the
// same shape. Neither product is stored. silu(g) = g / (1 + e^-g) with simd.h's vector Exp (within
// 2 ulp of expf), the same for every element whatever the split. With `norm`, of RmsNorm(x).
void MatMulSwiGlu(const float* x, int t, int ldx, const Matrix& gate, const Matrix& up, float* out,
                  int ldo, const RowNorm* norm = nullptr);

// The dot product of one f32 row and one row of w, in the same order MatMul uses.
float DotRow(const float* x, const Matrix& w, int row);

// Which kernels serve T > 1: AVX-512 where the CPU has it, else AVX2. Tests and benchmarks may
// pin AVX2 (SetMatMulIsa returns false when the CPU lacks the one asked for). Not thread-safe
// against running products.
enum class MatMulIsa { kAvx2, kAvx512 };
MatMulIsa ActiveMatMulIsa();
bool SetMatMulIsa(MatMulIsa isa);
const char* MatMulIsaName(MatMulIsa isa);

}  // namespace pdserve::model
