#include "model/cpu_matmul.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

namespace pdserve::model {
namespace {

template <DType D>
inline __m256 Load8(const void* base, size_t index) {
  if constexpr (D == DType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + index);
  } else if constexpr (D == DType::kBF16) {
    __m128i h = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + index));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    __m128i h = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + index));
    return _mm256_cvtph_ps(h);
  }
}

template <DType D>
inline float Load1(const void* base, size_t index) {
  if constexpr (D == DType::kF32) {
    return static_cast<const float*>(base)[index];
  } else if constexpr (D == DType::kBF16) {
    return BF16ToFloat(static_cast<const uint16_t*>(base)[index]);
  } else {
    return F16ToFloat(static_cast<const uint16_t*>(base)[index]);
  }
}

// Fixed-order horizontal sum: ((0+4)+(2+6)) + ((1+5)+(3+7)).
inline float HorizontalSum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
  return _mm_cvtss_f32(s);
}

// MR rows of X against NR rows of W over the whole K. Every instantiation sums each element in
// the same order, which is what makes MatMul batch-invariant.
template <DType D, int MR, int NR>
inline void MicroKernel(const float* x, int ldx, const void* w, size_t ldw, int k, float* y,
                        int ldy) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  int kk = 0;
  for (; kk + 8 <= k; kk += 8) {
    __m256 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = Load8<D>(w, j * ldw + kk);
    for (int i = 0; i < MR; ++i) {
      __m256 xv = _mm256_loadu_ps(x + static_cast<size_t>(i) * ldx + kk);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float s = HorizontalSum(acc[i][j]);
      for (int r = kk; r < k; ++r) {
        s = std::fma(x[static_cast<size_t>(i) * ldx + r], Load1<D>(w, j * ldw + r), s);
      }
      y[static_cast<size_t>(i) * ldy + j] = s;
    }
  }
}

// Rows [n0, n1) of W against all T rows of X. W rows are taken in blocks that stay in L2
// while every group of X rows passes over them.
template <DType D>
void MatMulRange(const float* x, int t, int ldx, const Matrix& w, float* y, int ldy, int n0,
                 int n1) {
  constexpr int kMR = 4, kNR = 3;
  const int k = w.cols;
  const size_t ldw = static_cast<size_t>(k);
  const size_t elem = DTypeSize(D);
  const auto* wbase = static_cast<const uint8_t*>(w.data);
  const int block = std::max<int>(
      kNR, static_cast<int>(256 * 1024 / std::max<size_t>(1, ldw * elem)) / kNR * kNR);
  for (int nb = n0; nb < n1; nb += block) {
    const int ne = std::min(n1, nb + block);
    int i = 0;
    if (t == 1) {
      // Decode: one X row; more W rows at once keep more loads in flight.
      int n = nb;
      for (; n + 8 <= ne; n += 8)
        MicroKernel<D, 1, 8>(x, ldx, wbase + n * ldw * elem, ldw, k, y + n, ldy);
      for (; n + 4 <= ne; n += 4)
        MicroKernel<D, 1, 4>(x, ldx, wbase + n * ldw * elem, ldw, k, y + n, ldy);
      for (; n < ne; ++n) MicroKernel<D, 1, 1>(x, ldx, wbase + n * ldw * elem, ldw, k, y + n, ldy);
      continue;
    }
    for (; i < t; i += kMR) {
      const int mr = std::min(kMR, t - i);
      const float* xi = x + static_cast<size_t>(i) * ldx;
      float* yi = y + static_cast<size_t>(i) * ldy;
      int n = nb;
      for (; n + kNR <= ne; n += kNR) {
        const void* wn = wbase + n * ldw * elem;
        switch (mr) {
          case 4:
            MicroKernel<D, 4, kNR>(xi, ldx, wn, ldw, k, yi + n, ldy);
            break;
          case 3:
            MicroKernel<D, 3, kNR>(xi, ldx, wn, ldw, k, yi + n, ldy);
            break;
          case 2:
            MicroKernel<D, 2, kNR>(xi, ldx, wn, ldw, k, yi + n, ldy);
            break;
          default:
            MicroKernel<D, 1, kNR>(xi, ldx, wn, ldw, k, yi + n, ldy);
            break;
        }
      }
      for (; n < ne; ++n) {
        const void* wn = wbase + n * ldw * elem;
        switch (mr) {
          case 4:
            MicroKernel<D, 4, 1>(xi, ldx, wn, ldw, k, yi + n, ldy);
            break;
          case 3:
            MicroKernel<D, 3, 1>(xi, ldx, wn, ldw, k, yi + n, ldy);
            break;
          case 2:
            MicroKernel<D, 2, 1>(xi, ldx, wn, ldw, k, yi + n, ldy);
            break;
          default:
            MicroKernel<D, 1, 1>(xi, ldx, wn, ldw, k, yi + n, ldy);
            break;
        }
      }
    }
  }
}

template <DType D>
void MatMulTyped(const float* x, int t, int ldx, const Matrix& w, float* y, int ldy) {
  // Blocks of W rows handed out dynamically: a thread the OS has parked does not hold up the
  // others for its whole share. A multiple of 24 rows keeps micro-kernel shapes whole.
  const int n = w.rows;
  const int block = std::max(24, (n / (8 * omp_get_max_threads())) / 24 * 24);
  const int blocks = (n + block - 1) / block;
#pragma omp parallel for schedule(dynamic, 1)
  for (int b = 0; b < blocks; ++b) {
    MatMulRange<D>(x, t, ldx, w, y, ldy, b * block, std::min(n, (b + 1) * block));
  }
}

}  // namespace

void MatMul(const float* x, int t, int ldx, const Matrix& w, float* y, int ldy) {
  if (t <= 0 || w.rows <= 0) return;
  switch (w.dtype) {
    case DType::kF32:
      MatMulTyped<DType::kF32>(x, t, ldx, w, y, ldy);
      return;
    case DType::kBF16:
      MatMulTyped<DType::kBF16>(x, t, ldx, w, y, ldy);
      return;
    case DType::kF16:
      MatMulTyped<DType::kF16>(x, t, ldx, w, y, ldy);
      return;
  }
}

float DotRow(const float* x, const Matrix& w, int row) {
  float y = 0;
  const size_t offset = static_cast<size_t>(row) * w.cols * DTypeSize(w.dtype);
  const void* wr = static_cast<const uint8_t*>(w.data) + offset;
  switch (w.dtype) {
    case DType::kF32:
      MicroKernel<DType::kF32, 1, 1>(x, w.cols, wr, w.cols, w.cols, &y, 1);
      break;
    case DType::kBF16:
      MicroKernel<DType::kBF16, 1, 1>(x, w.cols, wr, w.cols, w.cols, &y, 1);
      break;
    case DType::kF16:
      MicroKernel<DType::kF16, 1, 1>(x, w.cols, wr, w.cols, w.cols, &y, 1);
      break;
  }
  return y;
}

}  // namespace pdserve::model
