// The CPU engine's matrix product Y[T][N] = X[T][K] · W[N][K]^T, with W in f32, bf16 or f16
// (converted to f32 in registers, never copied) and X, Y in f32. AVX2 + FMA, threads over N.
//
// Batch invariance: every output element is the dot product of one X row and one W row, summed
// in the same order (8 lanes over k, then a fixed tree) whatever T, the blocking or the thread
// count. So a sequence's logits do not depend on what else is in its batch, and greedy tokens
// match bit for bit between one engine, a colocated worker and a prefill/decode pair.
//
// Call from one thread at a time per output buffer; it uses OpenMP threads internally.
#pragma once

#include "model/weights.h"

namespace pdserve::model {

// x: [t][ldx] (first k = w.cols used), y: [t][ldy] (first w.rows written).
void MatMul(const float* x, int t, int ldx, const Matrix& w, float* y, int ldy);

// The dot product of one f32 row and one row of w, in the same order MatMul uses.
float DotRow(const float* x, const Matrix& w, int row);

}  // namespace pdserve::model
