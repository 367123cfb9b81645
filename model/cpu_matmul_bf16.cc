#include "model/cpu_matmul_bf16.h"

#include <algorithm>
#include <cmath>

#include "model/simd.h"

namespace pdserve::model::bf16 {
namespace {

// GCC 12's AVX-512 broadcast and extract intrinsics pass an undefined vector as their unused
// merge source, which -Wmaybe-uninitialized reports at every use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

constexpr int kOddMask = static_cast<int>(0xffff0000u);

// 16 bf16 values: the even columns and the odd columns as f32, 8 each.
inline void Split(const uint16_t* w, __m256* even, __m256* odd) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
  *even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  *odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(kOddMask)));
}

// The 8-lane sum, the k % 16 tail in order, the store.
template <bool kAdd>
inline void Finish(__m256 lanes, const float* x, const uint16_t* w, int k16_end, int k, float* y) {
  float s = HorizontalSum(lanes);
  for (int r = k16_end; r < k; ++r) s = std::fma(x[r], BF16ToFloat(w[r]), s);
  if constexpr (kAdd) {
    *y = *y + s;
  } else {
    *y = s;
  }
}

// AVX2: MR packed X rows against NR W rows.
template <int MR, int NR, bool kAdd>
inline void Kernel(const float* xp, size_t xs, const float* x, int ldx, const uint16_t* w,
                   size_t ldw, int k, float* y, int ldy) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  const int k16 = k / 16;
  for (int b = 0; b < k16; ++b) {
    __m256 xe[MR], xo[MR];
    for (int i = 0; i < MR; ++i) {
      xe[i] = _mm256_loadu_ps(xp + i * xs + b * 16);
      xo[i] = _mm256_loadu_ps(xp + i * xs + b * 16 + 8);
    }
    for (int j = 0; j < NR; ++j) {
      __m256 we, wo;
      Split(w + j * ldw + b * 16, &we, &wo);
      for (int i = 0; i < MR; ++i) {
        acc[i][j] = _mm256_fmadd_ps(xe[i], we, acc[i][j]);
        acc[i][j] = _mm256_fmadd_ps(xo[i], wo, acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* yi = y + static_cast<size_t>(i) * ldy;
    if (NR > 1 && k16 * 16 == k) {
      StoreSums<NR, kAdd>(acc[i], yi);
      continue;
    }
    for (int j = 0; j < NR; ++j)
      Finish<kAdd>(acc[i][j], x + static_cast<size_t>(i) * ldx, w + j * ldw, k16 * 16, k, yi + j);
  }
}

// Decode: S runs side by side, one row of each at a time: S sequential weight streams and S
// independent sums, each row in Kernel's order. Each stream asks for its bytes
// kStreamPrefetchBytes ahead (cpu_matmul_bf16.h).
template <int S, bool kAdd>
void StreamRunsOf(const float* xp, const float* x, const Matrix& w, const RowRun* runs) {
  const int k = w.cols, k16 = k / 16;
  const size_t ldw = static_cast<size_t>(k);
  const auto* wb = static_cast<const uint16_t*>(w.data);
  int common = runs[0].n1 - runs[0].n0;
  for (int s = 1; s < S; ++s) common = std::min(common, runs[s].n1 - runs[s].n0);
  for (int i = 0; i < common; ++i) {
    const uint16_t* row[S];
    __m256 acc[S];
    for (int s = 0; s < S; ++s) {
      row[s] = wb + (runs[s].n0 + i) * ldw;
      acc[s] = _mm256_setzero_ps();
    }
    for (int b = 0; b < k16; ++b) {
      const __m256 xe = _mm256_loadu_ps(xp + b * 16), xo = _mm256_loadu_ps(xp + b * 16 + 8);
      if (b % 2 == 0) {  // once per 64-byte line of each stream
        for (int s = 0; s < S; ++s) {
          _mm_prefetch(reinterpret_cast<const char*>(row[s] + b * 16) + kStreamPrefetchBytes,
                       _MM_HINT_T0);
        }
      }
      for (int s = 0; s < S; ++s) {
        __m256 we, wo;
        Split(row[s] + b * 16, &we, &wo);
        acc[s] = _mm256_fmadd_ps(xe, we, acc[s]);
        acc[s] = _mm256_fmadd_ps(xo, wo, acc[s]);
      }
    }
    for (int s = 0; s < S; ++s) Finish<kAdd>(acc[s], x, row[s], k16 * 16, k, runs[s].y + i);
  }
  for (int s = 0; s < S; ++s) {
    for (int n = runs[s].n0 + common; n < runs[s].n1; ++n) {
      Kernel<1, 1, kAdd>(xp, 0, x, k, wb + n * ldw, ldw, k, runs[s].y + (n - runs[s].n0), 1);
    }
  }
}

// AVX-512: MP pairs of X rows (`rows` real) against NR W rows; pair p's block b is 32 floats:
// even columns of rows 2p and 2p+1, then their odd columns.
PDSERVE_AVX512 inline void Split512(const uint16_t* w, __m512* even, __m512* odd) {
  const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
  *even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  *odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(kOddMask)));
}

template <int MP, int NR, bool kAdd>
PDSERVE_AVX512 void Kernel512(const float* xp, size_t ps, const float* x, int ldx, int rows,
                              const uint16_t* w, size_t ldw, int k, float* y, int ldy) {
  __m512 acc[MP][NR];
  for (int p = 0; p < MP; ++p)
    for (int j = 0; j < NR; ++j) acc[p][j] = _mm512_setzero_ps();
  const int k16 = k / 16;
  for (int b = 0; b < k16; ++b) {
    __m512 xe[MP], xo[MP];
    for (int p = 0; p < MP; ++p) {
      xe[p] = _mm512_loadu_ps(xp + p * ps + b * 32);
      xo[p] = _mm512_loadu_ps(xp + p * ps + b * 32 + 16);
    }
    for (int j = 0; j < NR; ++j) {
      __m512 we, wo;
      Split512(w + j * ldw + b * 16, &we, &wo);
      for (int p = 0; p < MP; ++p) {
        acc[p][j] = _mm512_fmadd_ps(xe[p], we, acc[p][j]);
        acc[p][j] = _mm512_fmadd_ps(xo[p], wo, acc[p][j]);
      }
    }
  }
  for (int p = 0; p < MP; ++p) {
    for (int half = 0; half < 2; ++half) {
      const int r = 2 * p + half;
      if (r >= rows) break;
      float* yr = y + static_cast<size_t>(r) * ldy;
      __m256 lanes[NR];
      for (int j = 0; j < NR; ++j) {
        lanes[j] =
            half == 0 ? _mm512_castps512_ps256(acc[p][j]) : _mm512_extractf32x8_ps(acc[p][j], 1);
      }
      if (NR > 1 && k16 * 16 == k) {
        StoreSums<NR, kAdd>(lanes, yr);
        continue;
      }
      for (int j = 0; j < NR; ++j)
        Finish<kAdd>(lanes[j], x + static_cast<size_t>(r) * ldx, w + j * ldw, k16 * 16, k, yr + j);
    }
  }
}

constexpr int kMP512 = 4, kNR512 = 4;  // 16 accumulators, 8 X registers, 2 W registers

// One kernel call: X rows from pair p against W rows [n, n + NR), into y (at column n0).
template <bool kAdd, int NR>
PDSERVE_AVX512 inline void Call512(const PackedX& xp, const float* x, int t, int ldx,
                                   const Matrix& w, int n0, int n, int p, float* y, int ldy) {
  const size_t ldw = static_cast<size_t>(w.cols);
  const uint16_t* wn = static_cast<const uint16_t*>(w.data) + n * ldw;
  const int mp = std::min(kMP512, (t + 1) / 2 - p);
  const int rows = std::min(2 * mp, t - 2 * p);
  const float* xpp = xp.data.data() + p * xp.stride;
  const float* xi = x + static_cast<size_t>(2 * p) * ldx;
  float* yn = y + static_cast<size_t>(2 * p) * ldy + (n - n0);
  const size_t s = xp.stride;
  switch (mp) {
    case 4:
      return Kernel512<4, NR, kAdd>(xpp, s, xi, ldx, rows, wn, ldw, w.cols, yn, ldy);
    case 3:
      return Kernel512<3, NR, kAdd>(xpp, s, xi, ldx, rows, wn, ldw, w.cols, yn, ldy);
    case 2:
      return Kernel512<2, NR, kAdd>(xpp, s, xi, ldx, rows, wn, ldw, w.cols, yn, ldy);
    default:
      return Kernel512<1, NR, kAdd>(xpp, s, xi, ldx, rows, wn, ldw, w.cols, yn, ldy);
  }
}

// Small X (decode batches): every group of X rows over one panel of kNR512 W rows, then the
// next panel, while the next four go to L2 a slice per call (ForEachPanel; cpu_matmul_f32.cc's
// PanelOrder512, for bf16 rows).
template <bool kAdd>
PDSERVE_AVX512 void PanelOrder512(const PackedX& xp, const float* x, int t, int ldx,
                                  const Matrix& w, int n0, int n1, float* y, int ldy) {
  const size_t row_bytes = static_cast<size_t>(w.cols) * 2;
  const int groups = ((t + 1) / 2 + kMP512 - 1) / kMP512;
  // A call's whole share of the next panels goes out before it (kernel_lines 0): a prefetch
  // argument costs this kernel its registers (docs/benchmarks.md, Decode and prefill
  // throughput).
  ForEachPanel<kNR512>(w, row_bytes, n0, n1, groups, 0,
                       [&](int n, int rows, int g, const PrefetchLines&) {
                         if (rows == kNR512) {
                           Call512<kAdd, kNR512>(xp, x, t, ldx, w, n0, n, g * kMP512, y, ldy);
                         } else {
                           Call512<kAdd, 1>(xp, x, t, ldx, w, n0, n, g * kMP512, y, ldy);
                         }
                       });
}

// Large X (prompts): each L2 block of W rows, with every group of X rows passing over it.
template <bool kAdd>
PDSERVE_AVX512 void BlockOrder512(const PackedX& xp, const float* x, int t, int ldx,
                                  const Matrix& w, int n0, int n1, float* y, int ldy) {
  const int pairs = (t + 1) / 2;
  const int block = L2BlockRows(static_cast<size_t>(w.cols) * 2);
  for (int nb = n0; nb < n1; nb += block) {
    const int ne = std::min(n1, nb + block);
    for (int p = 0; p < pairs; p += kMP512) {
      int n = nb;
      for (; n + kNR512 <= ne; n += kNR512)
        Call512<kAdd, kNR512>(xp, x, t, ldx, w, n0, n, p, y, ldy);
      for (; n < ne; ++n) Call512<kAdd, 1>(xp, x, t, ldx, w, n0, n, p, y, ldy);
    }
  }
}

template <bool kAdd>
PDSERVE_AVX512 void Rows512(const PackedX& xp, const float* x, int t, int ldx, const Matrix& w,
                            int n0, int n1, float* y, int ldy) {
  if (PanelOrderFits(t, w.cols)) {
    PanelOrder512<kAdd>(xp, x, t, ldx, w, n0, n1, y, ldy);
  } else {
    BlockOrder512<kAdd>(xp, x, t, ldx, w, n0, n1, y, ldy);
  }
}

#pragma GCC diagnostic pop

template <bool kAdd>
void RowsAvx2(const PackedX& xp, const float* x, int t, int ldx, const Matrix& w, int n0, int n1,
              float* y, int ldy) {
  const int k = w.cols;
  const size_t ldw = static_cast<size_t>(k);
  const auto* wb = static_cast<const uint16_t*>(w.data);
  const size_t xs = xp.stride;
  constexpr int kMR = 2, kNR = 4;
  const int block = L2BlockRows(static_cast<size_t>(k) * 2);
  for (int nb = n0; nb < n1; nb += block) {
    const int ne = std::min(n1, nb + block);
    for (int i = 0; i < t; i += kMR) {
      const int mr = std::min(kMR, t - i);
      const float* xpi = xp.data.data() + i * xs;
      const float* xi = x + static_cast<size_t>(i) * ldx;
      float* yi = y + static_cast<size_t>(i) * ldy;
      int n = nb;
      auto run = [&]<int NR>() {
        const uint16_t* wn = wb + n * ldw;
        float* yn = yi + (n - n0);
        return mr == 2 ? Kernel<2, NR, kAdd>(xpi, xs, xi, ldx, wn, ldw, k, yn, ldy)
                       : Kernel<1, NR, kAdd>(xpi, xs, xi, ldx, wn, ldw, k, yn, ldy);
      };
      for (; n + kNR <= ne; n += kNR) run.template operator()<kNR>();
      for (; n < ne; ++n) run.template operator()<1>();
    }
  }
}

}  // namespace

void Pack(const float* x, int t, int ldx, int k, bool pairs, PackedX* out) {
  const int k16 = k / 16;
  out->pairs = pairs;
  if (!pairs) {
    out->stride = static_cast<size_t>(k16) * 16;
    out->data.resize(t * out->stride);
    for (int r = 0; r < t; ++r) {
      const float* src = x + static_cast<size_t>(r) * ldx;
      float* dst = out->data.data() + r * out->stride;
      for (int b = 0; b < k16; ++b) {
        for (int i = 0; i < 8; ++i) {
          dst[b * 16 + i] = src[b * 16 + 2 * i];
          dst[b * 16 + 8 + i] = src[b * 16 + 2 * i + 1];
        }
      }
    }
    return;
  }
  const int count = (t + 1) / 2;
  out->stride = static_cast<size_t>(k16) * 32;
  out->data.resize(count * out->stride);
  for (int p = 0; p < count; ++p) {
    float* dst = out->data.data() + p * out->stride;
    for (int half = 0; half < 2; ++half) {
      const int r = 2 * p + half;
      const float* src = r < t ? x + static_cast<size_t>(r) * ldx : nullptr;  // null: padding
      for (int b = 0; b < k16; ++b) {
        for (int i = 0; i < 8; ++i) {
          dst[b * 32 + half * 8 + i] = src ? src[b * 16 + 2 * i] : 0.0f;
          dst[b * 32 + 16 + half * 8 + i] = src ? src[b * 16 + 2 * i + 1] : 0.0f;
        }
      }
    }
  }
}

void Rows(const PackedX& xp, const float* x, int t, int ldx, const Matrix& w, bool add, int n0,
          int n1, float* y, int ldy) {
  if (xp.pairs) {
    add ? Rows512<true>(xp, x, t, ldx, w, n0, n1, y, ldy)
        : Rows512<false>(xp, x, t, ldx, w, n0, n1, y, ldy);
  } else {
    add ? RowsAvx2<true>(xp, x, t, ldx, w, n0, n1, y, ldy)
        : RowsAvx2<false>(xp, x, t, ldx, w, n0, n1, y, ldy);
  }
}

void StreamRuns(const PackedX& xp, const float* x, const Matrix& w, const RowRun* runs, int count,
                bool add) {
  WithStreamCount(count, [&]<int S>() {
    add ? StreamRunsOf<S, true>(xp.data.data(), x, w, runs)
        : StreamRunsOf<S, false>(xp.data.data(), x, w, runs);
  });
}

float DotRow(const float* x, const Matrix& w, int row) {
  PackedX xp;
  Pack(x, 1, w.cols, w.cols, false, &xp);
  const auto* wr = static_cast<const uint16_t*>(w.data) + static_cast<size_t>(row) * w.cols;
  float y = 0;
  Kernel<1, 1, false>(xp.data.data(), xp.stride, x, w.cols, wr, w.cols, w.cols, &y, 1);
  return y;
}

}  // namespace pdserve::model::bf16
