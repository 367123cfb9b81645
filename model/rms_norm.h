// RMSNorm of one row, shared by the CPU backend and the matrix products that normalise X as they
// read it (cpu_matmul.h's RowNorm), so that both give the same bits. Pure; any thread.
#pragma once

#include <cmath>

#include "model/simd.h"

namespace pdserve::model {

// out[i] = x[i] * (1 / sqrt(mean(x^2) + eps)) * weight[i], the mean through simd.h's Dot.
inline void RmsNorm(const float* x, const float* weight, int n, float eps, float* out) {
  const float mean_square = Dot(x, x, n) / static_cast<float>(n);
  const float scale = 1.0f / std::sqrt(mean_square + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

}  // namespace pdserve::model
