#include "model/cpu_matmul_f32.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/simd.h"

namespace pdserve::model::f32 {
namespace {

// ---- The summation order of f32 and f16 weights (bf16: cpu_matmul_bf16.h) ----

// D is kF32 or kF16 in this file.

template <DType D>
inline __m256 Load8(const void* base, size_t index) {
  if constexpr (D == DType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + index);
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
  } else {
    return F16ToFloat(static_cast<const uint16_t*>(base)[index]);
  }
}

// The end of one output element: the 8-lane sum, then the k % 8 tail in order, then the store.
template <DType D, bool kAdd>
inline void Finish(__m256 lanes, const float* x, const void* w, int k8_end, int k, float* y) {
  float s = HorizontalSum(lanes);
  for (int r = k8_end; r < k; ++r) s = std::fma(x[r], Load1<D>(w, r), s);
  if constexpr (kAdd) {
    *y = *y + s;
  } else {
    *y = s;
  }
}

// ---- AVX2: MR rows of X against NR rows of W over the whole K ----

template <DType D, int MR, int NR, bool kAdd>
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
  const size_t elem = DTypeSize(D);
  for (int i = 0; i < MR; ++i) {
    float* yi = y + static_cast<size_t>(i) * ldy;
    if (NR > 1 && kk == k) {
      StoreSums<NR, kAdd>(acc[i], yi);
      continue;
    }
    for (int j = 0; j < NR; ++j) {
      Finish<D, kAdd>(acc[i][j], x + static_cast<size_t>(i) * ldx,
                      static_cast<const uint8_t*>(w) + j * ldw * elem, kk, k, yi + j);
    }
  }
}

// Rows [n0, n1) of W against all T rows of X; y points at column n0. W rows are taken in blocks
// that stay in L2 while every group of X rows passes over them. (Decode, T = 1, goes through
// StreamRuns instead.)
template <DType D, bool kAdd>
void RowsAvx2(const float* x, int t, int ldx, const Matrix& w, int n0, int n1, float* y, int ldy) {
  constexpr int kMR = 4, kNR = 3;
  const int k = w.cols;
  const size_t ldw = static_cast<size_t>(k);
  const size_t elem = DTypeSize(D);
  const auto* wbase = static_cast<const uint8_t*>(w.data);
  const int block = L2BlockRows(ldw * elem);
  for (int nb = n0; nb < n1; nb += block) {
    const int ne = std::min(n1, nb + block);
    for (int i = 0; i < t; i += kMR) {
      const int mr = std::min(kMR, t - i);
      const float* xi = x + static_cast<size_t>(i) * ldx;
      float* yi = y + static_cast<size_t>(i) * ldy;
      int n = nb;
      auto run = [&]<int NR>() {
        const void* wn = wbase + n * ldw * elem;
        float* yn = yi + (n - n0);
        switch (mr) {
          case 4:
            return MicroKernel<D, 4, NR, kAdd>(xi, ldx, wn, ldw, k, yn, ldy);
          case 3:
            return MicroKernel<D, 3, NR, kAdd>(xi, ldx, wn, ldw, k, yn, ldy);
          case 2:
            return MicroKernel<D, 2, NR, kAdd>(xi, ldx, wn, ldw, k, yn, ldy);
          default:
            return MicroKernel<D, 1, NR, kAdd>(xi, ldx, wn, ldw, k, yn, ldy);
        }
      };
      for (; n + kNR <= ne; n += kNR) run.template operator()<kNR>();
      for (; n < ne; ++n) run.template operator()<1>();
    }
  }
}

// ---- Decode (T = 1): several runs of W rows walked side by side ----

// One X row against S runs, one row of each at a time: S sequential weight streams, which the
// hardware prefetchers follow much better than 8 adjacent rows at once, and S independent sums.
// Same order per row. No software prefetch: it does not help f32 or f16 (docs/benchmarks.md,
// Decode and prefill throughput).
template <DType D, int S, bool kAdd>
void StreamRuns(const float* x, const Matrix& w, const RowRun* runs) {
  const int k = w.cols;
  const size_t row_bytes = static_cast<size_t>(k) * DTypeSize(D);
  const auto* wbase = static_cast<const uint8_t*>(w.data);
  int common = runs[0].n1 - runs[0].n0;
  for (int s = 1; s < S; ++s) common = std::min(common, runs[s].n1 - runs[s].n0);
  for (int i = 0; i < common; ++i) {
    const uint8_t* row[S];
    for (int s = 0; s < S; ++s) row[s] = wbase + (runs[s].n0 + i) * row_bytes;
    __m256 acc[S];
    for (int s = 0; s < S; ++s) acc[s] = _mm256_setzero_ps();
    int kk = 0;
    for (; kk + 8 <= k; kk += 8) {
      const __m256 xv = _mm256_loadu_ps(x + kk);
      for (int s = 0; s < S; ++s) acc[s] = _mm256_fmadd_ps(xv, Load8<D>(row[s], kk), acc[s]);
    }
    for (int s = 0; s < S; ++s) Finish<D, kAdd>(acc[s], x, row[s], kk, k, runs[s].y + i);
  }
  for (int s = 0; s < S; ++s) {
    for (int n = runs[s].n0 + common; n < runs[s].n1; ++n) {
      MicroKernel<D, 1, 1, kAdd>(x, k, wbase + n * row_bytes, k, k, runs[s].y + (n - runs[s].n0),
                                 1);
    }
  }
}

// ---- AVX-512: two X rows per 16-lane register, each half in the AVX2 order ----

// GCC 12's AVX-512 broadcast and extract intrinsics pass an undefined vector as their unused
// merge source, which -Wmaybe-uninitialized reports at every use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// 8 W values at `index`, converted to f32 and copied to both halves.
template <DType D>
PDSERVE_AVX512 inline __m512 Broadcast8(const void* base, size_t index) {
  if constexpr (D == DType::kF32) {
    return _mm512_broadcast_f32x8(_mm256_loadu_ps(static_cast<const float*>(base) + index));
  } else {
    return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + index))));
  }
}

// One group of MP pairs of X rows (`rows` of them real; xp at the group) against NR rows of W.
template <DType D, int MP, int NR, bool kAdd>
PDSERVE_AVX512 void MicroKernel512(const float* xp, const float* x, int ldx, int rows,
                                   const void* w, size_t ldw, int k, float* y, int ldy,
                                   const PrefetchLines& prefetch) {
  __m512 acc[MP][NR];
  for (int p = 0; p < MP; ++p)
    for (int j = 0; j < NR; ++j) acc[p][j] = _mm512_setzero_ps();
  const int k8 = k / 8;
  for (int b = 0; b < k8; ++b) {
    if (b < prefetch.count) prefetch.Fetch(b);
    __m512 xv[MP];
    for (int p = 0; p < MP; ++p) xv[p] = _mm512_loadu_ps(xp + (b * MP + p) * 16);
    for (int j = 0; j < NR; ++j) {
      const __m512 wv = Broadcast8<D>(w, j * ldw + b * 8);
      for (int p = 0; p < MP; ++p) acc[p][j] = _mm512_fmadd_ps(xv[p], wv, acc[p][j]);
    }
  }
  const size_t elem = DTypeSize(D);
  for (int p = 0; p < MP; ++p) {
    for (int half = 0; half < 2; ++half) {
      const int r = 2 * p + half;
      if (r >= rows) break;
      const float* xr = x + static_cast<size_t>(r) * ldx;
      float* yr = y + static_cast<size_t>(r) * ldy;
      if (NR > 1 && k8 * 8 == k) {
        __m256 lanes[NR];
        for (int j = 0; j < NR; ++j) {
          lanes[j] =
              half == 0 ? _mm512_castps512_ps256(acc[p][j]) : _mm512_extractf32x8_ps(acc[p][j], 1);
        }
        StoreSums<NR, kAdd>(lanes, yr);
        continue;
      }
      for (int j = 0; j < NR; ++j) {
        const __m256 lanes =
            half == 0 ? _mm512_castps512_ps256(acc[p][j]) : _mm512_extractf32x8_ps(acc[p][j], 1);
        Finish<D, kAdd>(lanes, xr, static_cast<const uint8_t*>(w) + j * ldw * elem, k8 * 8, k,
                        yr + j);
      }
    }
  }
}

// One kernel call: rows [2p, 2p + 2 mp) of X (packed pairs from pair p) against W rows
// [n, n + NR), into y (pointing at column n0); sends `pf`'s lines to L2, one a column block.
template <DType D, bool kAdd, int NR>
PDSERVE_AVX512 inline void Call512(const PackedPairs& xp, const float* x, int t, int ldx,
                                   const Matrix& w, int n0, int n, int p, float* y, int ldy,
                                   const PrefetchLines& pf) {
  const size_t ldw = static_cast<size_t>(w.cols);
  const void* wn = static_cast<const uint8_t*>(w.data) + n * ldw * DTypeSize(D);
  const int mp = std::min(kGroupPairs, (t + 1) / 2 - p);
  const int rows = std::min(2 * mp, t - 2 * p);
  const float* xpp = xp.data.data() + p * xp.pair_stride;
  const float* xi = x + static_cast<size_t>(2 * p) * ldx;
  float* yn = y + static_cast<size_t>(2 * p) * ldy + (n - n0);
  switch (mp) {
    case 4:
      return MicroKernel512<D, 4, NR, kAdd>(xpp, xi, ldx, rows, wn, ldw, w.cols, yn, ldy, pf);
    case 3:
      return MicroKernel512<D, 3, NR, kAdd>(xpp, xi, ldx, rows, wn, ldw, w.cols, yn, ldy, pf);
    case 2:
      return MicroKernel512<D, 2, NR, kAdd>(xpp, xi, ldx, rows, wn, ldw, w.cols, yn, ldy, pf);
    default:
      return MicroKernel512<D, 1, NR, kAdd>(xpp, xi, ldx, rows, wn, ldw, w.cols, yn, ldy, pf);
  }
}

constexpr int kNR512 = 6;  // W rows a call: 24 accumulators, 4 X registers, 1 W register

// Every group of X rows over one panel of W rows, then the next panel: W streams from memory
// once, evenly, each panel used by all of X while it is in L1 (L2 at K = 2048), and the next
// panels go to L2 a slice per call meanwhile (ForEachPanel). X (at most kPanelOrderXBytes) stays
// in L2. Decode batches take this order over block order after the paired runs in
// docs/benchmarks.md (Matrix kernels).
template <DType D, bool kAdd>
PDSERVE_AVX512 void PanelOrder512(const PackedPairs& xp, const float* x, int t, int ldx,
                                  const Matrix& w, int n0, int n1, float* y, int ldy) {
  const size_t row_bytes = static_cast<size_t>(w.cols) * DTypeSize(D);
  const int groups = ((t + 1) / 2 + kGroupPairs - 1) / kGroupPairs;
  // The kernel prefetches one line a column block; ForEachPanel sends the rest of a call's
  // lines (one X group, T <= 8) before the call.
  ForEachPanel<kNR512>(
      w, row_bytes, n0, n1, groups, w.cols / 8,
      [&](int n, int rows, int g, const PrefetchLines& prefetch) {
        if (rows == kNR512) {
          Call512<D, kAdd, kNR512>(xp, x, t, ldx, w, n0, n, g * kGroupPairs, y, ldy, prefetch);
        } else {
          Call512<D, kAdd, 1>(xp, x, t, ldx, w, n0, n, g * kGroupPairs, y, ldy, prefetch);
        }
      });
}

// Each L2 block of W rows, with every group of X rows passing over it, then the next block.
template <DType D, bool kAdd>
PDSERVE_AVX512 void BlockOrder512(const PackedPairs& xp, const float* x, int t, int ldx,
                                  const Matrix& w, int n0, int n1, float* y, int ldy) {
  const size_t row_bytes = static_cast<size_t>(w.cols) * DTypeSize(D);
  const auto* wbase = static_cast<const char*>(w.data);
  const int pairs = (t + 1) / 2;
  const int block = L2BlockRows(row_bytes);
  const int groups = (pairs + kGroupPairs - 1) / kGroupPairs;
  for (int nb = n0; nb < n1; nb += block) {
    const int ne = std::min(n1, nb + block);
    // The next block's rows go to L2 a slice per kernel call, while this block's are reused
    // (past n1 too: a thread's next piece of rows usually starts there). Only over the passes
    // that find this block in L2, when there are such: during the first, this block's own rows
    // stream from memory, and fetching the next one beside them slows both (docs/benchmarks.md,
    // Matrix kernels).
    const char* next = wbase + ne * row_bytes;
    const int next_lines = static_cast<int>((std::min(w.rows, ne + block) - ne) * row_bytes / 64);
    const int first_prefetching_group = groups > 1 ? 1 : 0;
    const int calls = (groups - first_prefetching_group) * ((ne - nb + kNR512 - 1) / kNR512);
    const int lines_per_call = std::max(1, (next_lines + calls - 1) / calls);
    int call = 0;
    for (int g = 0; g < groups; ++g) {
      const bool prefetching = g >= first_prefetching_group;
      int n = nb;
      auto run = [&]<int NR>() {
        const int first = prefetching ? call++ * lines_per_call : 0;
        const int pf_lines = prefetching ? std::clamp(next_lines - first, 0, lines_per_call) : 0;
        const PrefetchLines pf =
            PrefetchLines::Run(next + static_cast<size_t>(first) * 64, pf_lines);
        Call512<D, kAdd, NR>(xp, x, t, ldx, w, n0, n, g * kGroupPairs, y, ldy, pf);
      };
      for (; n + kNR512 <= ne; n += kNR512) run.template operator()<kNR512>();
      for (; n < ne; ++n) run.template operator()<1>();
    }
  }
}

template <DType D, bool kAdd>
PDSERVE_AVX512 void Rows512(const PackedPairs& xp, const float* x, int t, int ldx, const Matrix& w,
                            int n0, int n1, float* y, int ldy) {
  if (PanelOrderFits(t, w.cols)) {
    PanelOrder512<D, kAdd>(xp, x, t, ldx, w, n0, n1, y, ldy);
  } else {
    BlockOrder512<D, kAdd>(xp, x, t, ldx, w, n0, n1, y, ldy);
  }
}

#pragma GCC diagnostic pop

}  // namespace

void PackPairs(const float* x, int t, int ldx, int k8, PackedPairs* out) {
  const int pairs = (t + 1) / 2;
  out->pair_stride = static_cast<size_t>(k8) * 16;
  out->data.resize(pairs * out->pair_stride);
  for (int p = 0; p < pairs; ++p) {
    const int group = p / kGroupPairs, slot = p % kGroupPairs;
    const int m = std::min(kGroupPairs, pairs - group * kGroupPairs);
    float* dst = out->data.data() + group * kGroupPairs * out->pair_stride + slot * 16;
    for (int half = 0; half < 2; ++half) {
      const int r = 2 * p + half;
      for (int b = 0; b < k8; ++b) {
        float* d = dst + static_cast<size_t>(b) * m * 16 + half * 8;
        if (r < t) {
          std::memcpy(d, x + static_cast<size_t>(r) * ldx + b * 8, 8 * sizeof(float));
        } else {
          std::fill_n(d, 8, 0.0f);
        }
      }
    }
  }
}

void Rows(const PackedPairs* pairs, const float* x, int t, int ldx, const Matrix& w, bool add,
          int n0, int n1, float* y, int ldy) {
  auto typed = [&]<DType D>() {
    if (pairs) {
      add ? Rows512<D, true>(*pairs, x, t, ldx, w, n0, n1, y, ldy)
          : Rows512<D, false>(*pairs, x, t, ldx, w, n0, n1, y, ldy);
    } else {
      add ? RowsAvx2<D, true>(x, t, ldx, w, n0, n1, y, ldy)
          : RowsAvx2<D, false>(x, t, ldx, w, n0, n1, y, ldy);
    }
  };
  w.dtype == DType::kF16 ? typed.template operator()<DType::kF16>()
                         : typed.template operator()<DType::kF32>();
}

void StreamRuns(const float* x, const Matrix& w, const RowRun* runs, int count, bool add) {
  const bool f16 = w.dtype == DType::kF16;
  WithStreamCount(count, [&]<int S>() {
    if (f16) {
      add ? StreamRuns<DType::kF16, S, true>(x, w, runs)
          : StreamRuns<DType::kF16, S, false>(x, w, runs);
    } else {
      add ? StreamRuns<DType::kF32, S, true>(x, w, runs)
          : StreamRuns<DType::kF32, S, false>(x, w, runs);
    }
  });
}

float DotRow(const float* x, const Matrix& w, int row) {
  float y = 0;
  const size_t offset = static_cast<size_t>(row) * w.cols * DTypeSize(w.dtype);
  const void* wr = static_cast<const uint8_t*>(w.data) + offset;
  if (w.dtype == DType::kF16) {
    MicroKernel<DType::kF16, 1, 1, false>(x, w.cols, wr, w.cols, w.cols, &y, 1);
  } else {
    MicroKernel<DType::kF32, 1, 1, false>(x, w.cols, wr, w.cols, w.cols, &y, 1);
  }
  return y;
}

}  // namespace pdserve::model::f32
