#include "model/cpu_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "model/cpu_matmul.h"
#include "model/simd.h"

namespace pdserve::model {
namespace {

constexpr int kChunk = 8;  // keys scored, and values summed, together

// count rounded up to whole chunks: the floats of scratch one head's scores take.
int PaddedCount(int count) { return (count + kChunk - 1) / kChunk * kChunk; }

// For G query heads at once, q[h] · key[i][0, n) for 8 keys, n a multiple of 8: 8 * G
// independent multiply-add chains sharing each key load, then the eight horizontal sums of each
// head; lane i of scores[h] is the same bits as Dot(q[h], key[i], n). Always inlined: the
// AVX-512 caller compiles it with 32 vector registers, where G = 3 fits (24 sums).
template <int G>
__attribute__((always_inline)) inline void Dot8Keys(const float* const q[G],
                                                    const float* const key[kChunk], int n,
                                                    __m256 scores[G]) {
  __m256 acc[G][kChunk];
  for (int h = 0; h < G; ++h)
    for (int i = 0; i < kChunk; ++i) acc[h][i] = _mm256_setzero_ps();
  for (int d = 0; d < n; d += 8) {
    __m256 qv[G];
    for (int h = 0; h < G; ++h) qv[h] = _mm256_loadu_ps(q[h] + d);
    for (int i = 0; i < kChunk; ++i) {
      const __m256 k = _mm256_loadu_ps(key[i] + d);
      for (int h = 0; h < G; ++h) acc[h][i] = _mm256_fmadd_ps(qv[h], k, acc[h][i]);
    }
  }
  for (int h = 0; h < G; ++h) scores[h] = HorizontalSums8(acc[h]);
}

// scores[j] = exp(scores[j] - max) over j < count, returning their sum. scores has room for
// PaddedCount(count): the padding gets exp(-FLT_MAX) = 0, so every position goes through the
// same vector code.
float ExpAndSum(float* scores, int count) {
  const int padded = PaddedCount(count);
  std::fill(scores + count, scores + padded, -FLT_MAX);
  __m256 m = _mm256_set1_ps(-FLT_MAX);
  for (int j = 0; j < padded; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(scores + j));
  const __m256 max = _mm256_set1_ps(HorizontalMax(m));
  __m256 sum = _mm256_setzero_ps();
  for (int j = 0; j < padded; j += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(scores + j), max));
    _mm256_storeu_ps(scores + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  return HorizontalSum(sum);
}

// out[0, n) += sum over i < keys of p[i] * value[i][0, n): the chunk's sum first (in key order,
// from zero), then added to out.
void AddWeightedChunk(const float* p, const float* const* value, int keys, int n, float* out) {
  constexpr int kRegs = 8;
  int d = 0;
  for (; d + 8 * kRegs <= n; d += 8 * kRegs) {
    __m256 acc[kRegs];
    for (int r = 0; r < kRegs; ++r) acc[r] = _mm256_setzero_ps();
    for (int i = 0; i < keys; ++i) {
      const __m256 pi = _mm256_set1_ps(p[i]);
      for (int r = 0; r < kRegs; ++r)
        acc[r] = _mm256_fmadd_ps(pi, _mm256_loadu_ps(value[i] + d + 8 * r), acc[r]);
    }
    for (int r = 0; r < kRegs; ++r) {
      float* o = out + d + 8 * r;
      _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o), acc[r]));
    }
  }
  for (; d + 8 <= n; d += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < keys; ++i)
      acc = _mm256_fmadd_ps(_mm256_set1_ps(p[i]), _mm256_loadu_ps(value[i] + d), acc);
    _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_loadu_ps(out + d), acc));
  }
  for (; d < n; ++d) {
    float s = 0;
    for (int i = 0; i < keys; ++i) s = std::fma(p[i], value[i][d], s);
    out[d] += s;
  }
}

// AddWeightedChunk for G heads at once on AVX-512, sharing each value load: per element the
// same operations in the same order (a multiply-add chain over the chunk's keys from zero, then
// the add into out), so the same bits, 16 columns to a register.
template <int G>
PDSERVE_AVX512 void AddWeightedChunk512(const float* const p[G], const float* const* value,
                                        int keys, int n, float* const out[G]) {
  constexpr int kRegs = 4;  // 64 columns a pass: G * 4 sums
  int d = 0;
  for (; d + 16 * kRegs <= n; d += 16 * kRegs) {
    __m512 acc[G][kRegs];
    for (int h = 0; h < G; ++h)
      for (int r = 0; r < kRegs; ++r) acc[h][r] = _mm512_setzero_ps();
    for (int i = 0; i < keys; ++i) {
      __m512 pi[G];
      for (int h = 0; h < G; ++h) pi[h] = _mm512_set1_ps(p[h][i]);
      for (int r = 0; r < kRegs; ++r) {
        const __m512 v = _mm512_loadu_ps(value[i] + d + 16 * r);
        for (int h = 0; h < G; ++h) acc[h][r] = _mm512_fmadd_ps(pi[h], v, acc[h][r]);
      }
    }
    for (int h = 0; h < G; ++h) {
      for (int r = 0; r < kRegs; ++r) {
        float* o = out[h] + d + 16 * r;
        _mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), acc[h][r]));
      }
    }
  }
  if (d == n) return;
  const float* rest[kChunk];
  for (int i = 0; i < keys; ++i) rest[i] = value[i] + d;
  for (int h = 0; h < G; ++h) AddWeightedChunk(p[h], rest, keys, n - d, out[h] + d);
}

// Walks a list of regions a cache line at a time, prefetching their first kMaxPrefetchBytes over
// the last Step calls of the call, no fewer than kMinLinesPerStep a step. Fetched further ahead
// than that, the next token's first rows would leave the cache again, pushed out by this
// token's own (a long context's rows are megabytes); past them, the hardware prefetchers follow
// the rows' pages on their own.
class SpreadPrefetch {
 public:
  static constexpr size_t kMaxPrefetchBytes = 256 * 1024;
  static constexpr size_t kMinLinesPerStep = 32;

  // `steps`: how many Step calls the call makes.
  SpreadPrefetch(std::span<const MemoryRegion> regions, int steps) : regions_(regions) {
    size_t bytes = 0;
    for (const MemoryRegion& r : regions) bytes += r.bytes;
    left_ = (std::min(bytes, kMaxPrefetchBytes) + 63) / 64;
    if (left_ == 0) return;
    const size_t all_steps = std::max(steps, 1);
    per_step_ = std::max((left_ + all_steps - 1) / all_steps, kMinLinesPerStep);
    idle_steps_ = all_steps - std::min(all_steps, (left_ + per_step_ - 1) / per_step_);
  }

  void Step() {
    if (idle_steps_ > 0) {
      --idle_steps_;
      return;
    }
    for (size_t n = 0; n < per_step_ && left_ > 0 && region_ < regions_.size(); ++n, --left_) {
      const MemoryRegion& r = regions_[region_];
      if (offset_ < r.bytes) {
        _mm_prefetch(static_cast<const char*>(r.data) + offset_, _MM_HINT_T0);
        offset_ += 64;
      }
      if (offset_ >= r.bytes) {
        ++region_;
        offset_ = 0;
      }
    }
  }

 private:
  std::span<const MemoryRegion> regions_;
  size_t left_ = 0;  // lines still to prefetch
  size_t per_step_ = 0, idle_steps_ = 0;
  size_t region_ = 0, offset_ = 0;
};

}  // namespace

void WarmRegions(std::span<const MemoryRegion> regions) {
  // Four independent sums, so that loads are not held back behind one chain of adds.
  __m256 sum[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (const MemoryRegion& r : regions) {
    const auto* bytes = static_cast<const char*>(r.data);
    size_t b = 0;
    for (; b + 256 <= r.bytes; b += 256) {
      for (int i = 0; i < 4; ++i) {
        sum[i] = _mm256_add_ps(sum[i],
                               _mm256_loadu_ps(reinterpret_cast<const float*>(bytes + b + 64 * i)));
      }
    }
    for (; b < r.bytes; b += 64) _mm_prefetch(bytes + b, _MM_HINT_T0);
  }
  // Keeps the loads: the compiler may not drop what it cannot prove unused.
  volatile float sink =
      _mm256_cvtss_f32(_mm256_add_ps(_mm256_add_ps(sum[0], sum[1]), _mm256_add_ps(sum[2], sum[3])));
  (void)sink;
}

size_t AttentionScratchFloats(const AttentionRow& a) {
  const int heads = (a.kv_head_end - a.kv_head_begin) * a.group;
  return static_cast<size_t>(heads) * (PaddedCount(a.count) + 1);  // scores and 1/sum
}

namespace {

// f.template operator()<G>(h) with G = g (1 <= g <= kMax) as a compile-time constant; only the
// counts up to kMax are instantiated.
template <int kMax, typename F>
__attribute__((always_inline)) inline void WithHeadCount(int g, int h, const F& f) {
  if constexpr (kMax > 1) {
    if (g < kMax) return WithHeadCount<kMax - 1>(g, h, f);
  }
  f.template operator()<kMax>(h);
}

// Runs [h, h + G) of at most kMax (1 to 3) of the query heads [h0, h1), through WithHeadCount.
template <int kMax, typename F>
__attribute__((always_inline)) inline void ForHeadRuns(int h0, int h1, const F& f) {
  for (int h = h0; h < h1;) {
    const int g = std::min(kMax, h1 - h);
    WithHeadCount<kMax>(g, h, f);
    h += g;
  }
}

// The body of AttendRow for both instruction sets. kWide: the AVX-512 build, with 32 vector
// registers, scores three query heads of a KV head at once and sums values 16 columns to a
// register. Every output is the same bits either way.
template <bool kWide>
__attribute__((always_inline)) inline void AttendRowImpl(const AttentionRow& a, float* scratch,
                                                         float* out) {
  constexpr int kHeadsAtOnce = kWide ? 3 : 1;
  const int hd = a.head_dim, g0 = a.kv_head_begin, g1 = a.kv_head_end;
  const int stride = PaddedCount(a.count);  // scratch floats per head
  // Query head h (of the covered ones, counted from g0 * group) scores into its own row.
  auto scores_of = [&](int h) { return scratch + static_cast<size_t>(h - g0 * a.group) * stride; };

  // One prefetch step per chunk of scores and per chunk of values.
  const int chunks = (a.count + kChunk - 1) / kChunk;
  SpreadPrefetch prefetch(a.prefetch, 2 * chunks);

  // Scores, chunk by chunk: a chunk's rows are read once for every covered head.
  const __m256 scale = _mm256_set1_ps(a.scale);
  int j = 0;
  for (; j + kChunk <= a.count && hd % 8 == 0; j += kChunk) {
    prefetch.Step();
    for (int g = g0; g < g1; ++g) {
      const float* key[kChunk];
      for (int i = 0; i < kChunk; ++i) key[i] = a.keys[j + i] + g * hd;
      ForHeadRuns<kHeadsAtOnce>(g * a.group, (g + 1) * a.group, [&]<int G>(int h) {
        const float* q[G];
        for (int e = 0; e < G; ++e) q[e] = a.q + (h + e) * hd;
        __m256 sums[G];
        Dot8Keys<G>(q, key, hd, sums);
        for (int e = 0; e < G; ++e)
          _mm256_storeu_ps(scores_of(h + e) + j, _mm256_mul_ps(sums[e], scale));
      });
    }
  }
  for (; j < a.count; ++j) {
    for (int h = g0 * a.group; h < g1 * a.group; ++h)
      scores_of(h)[j] = Dot(a.q + h * hd, a.keys[j] + (h / a.group) * hd, hd) * a.scale;
  }

  // Softmax weights, unnormalised; the outputs are scaled by 1/sum at the end.
  float* inv_sum = scratch + static_cast<size_t>((g1 - g0) * a.group) * stride;
  for (int h = g0 * a.group; h < g1 * a.group; ++h)
    inv_sum[h - g0 * a.group] = 1.0f / ExpAndSum(scores_of(h), a.count);

  // Values, chunk by chunk, likewise.
  for (int h = g0 * a.group; h < g1 * a.group; ++h) std::fill_n(out + h * hd, hd, 0.0f);
  for (j = 0; j < a.count; j += kChunk) {
    prefetch.Step();
    const int keys = std::min(kChunk, a.count - j);
    for (int g = g0; g < g1; ++g) {
      const float* value[kChunk];
      for (int i = 0; i < keys; ++i) value[i] = a.values[j + i] + g * hd;
      if constexpr (kWide) {
        ForHeadRuns<3>(g * a.group, (g + 1) * a.group, [&]<int G>(int h) {
          const float* p[G];
          float* o[G];
          for (int e = 0; e < G; ++e) {
            p[e] = scores_of(h + e) + j;
            o[e] = out + (h + e) * hd;
          }
          AddWeightedChunk512<G>(p, value, keys, hd, o);
        });
      } else {
        for (int h = g * a.group; h < (g + 1) * a.group; ++h)
          AddWeightedChunk(scores_of(h) + j, value, keys, hd, out + h * hd);
      }
    }
  }
  for (int h = g0 * a.group; h < g1 * a.group; ++h) {
    const float inv = inv_sum[h - g0 * a.group];
    for (int d = 0; d < hd; ++d) out[h * hd + d] *= inv;
  }
}

void AttendRowAvx2(const AttentionRow& a, float* scratch, float* out) {
  AttendRowImpl<false>(a, scratch, out);
}

PDSERVE_AVX512 void AttendRowAvx512(const AttentionRow& a, float* scratch, float* out) {
  AttendRowImpl<true>(a, scratch, out);
}

}  // namespace

void AttendRow(const AttentionRow& a, float* scratch, float* out) {
  // The matrix products' choice, so that a pinned AVX2 run is AVX2 throughout.
  if (ActiveMatMulIsa() == MatMulIsa::kAvx512) return AttendRowAvx512(a, scratch, out);
  AttendRowAvx2(a, scratch, out);
}

}  // namespace pdserve::model
