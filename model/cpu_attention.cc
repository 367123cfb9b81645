#include "model/cpu_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "model/simd.h"

namespace pdserve::model {
namespace {

constexpr int kChunk = 8;  // keys scored, and values summed, together

// count rounded up to whole chunks: the floats of scratch one head's scores take.
int PaddedCount(int count) { return (count + kChunk - 1) / kChunk * kChunk; }

// q · key[i][0, n) for 8 keys, n a multiple of 8: eight independent multiply-add chains, then
// the eight horizontal sums at once; lane i is the same bits as Dot(q, key[i], n).
inline __m256 Dot8Keys(const float* q, const float* const key[kChunk], int n) {
  __m256 acc[kChunk];
  for (int i = 0; i < kChunk; ++i) acc[i] = _mm256_setzero_ps();
  for (int d = 0; d < n; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    for (int i = 0; i < kChunk; ++i)
      acc[i] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(key[i] + d), acc[i]);
  }
  return HorizontalSums8(acc);
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

// Walks a list of regions a cache line at a time, prefetching `lines` more at each Step.
class SpreadPrefetch {
 public:
  // `steps`: how many Step calls the prefetches are spread over.
  SpreadPrefetch(std::span<const MemoryRegion> regions, int steps) : regions_(regions) {
    size_t lines = 0;
    for (const MemoryRegion& r : regions) lines += (r.bytes + 63) / 64;
    per_step_ = steps > 0 ? (lines + steps - 1) / steps : lines;
  }

  void Step() {
    for (size_t n = 0; n < per_step_ && region_ < regions_.size(); ++n) {
      const MemoryRegion& r = regions_[region_];
      _mm_prefetch(static_cast<const char*>(r.data) + offset_, _MM_HINT_T0);
      offset_ += 64;
      if (offset_ >= r.bytes) {
        ++region_;
        offset_ = 0;
      }
    }
  }

 private:
  std::span<const MemoryRegion> regions_;
  size_t per_step_ = 0;
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

void AttendRow(const AttentionRow& a, float* scratch, float* out) {
  const int hd = a.head_dim, g0 = a.kv_head_begin, g1 = a.kv_head_end;
  const int stride = PaddedCount(a.count);  // scratch floats per head
  // Query head h (of the covered ones, counted from g0 * group) scores into its own row.
  auto scores_of = [&](int h) { return scratch + static_cast<size_t>(h - g0 * a.group) * stride; };

  // Scores, chunk by chunk: a chunk's rows are read once for every covered head.
  // One prefetch step per chunk of scores and per chunk of values.
  const int chunks = (a.count + kChunk - 1) / kChunk;
  SpreadPrefetch prefetch(a.prefetch, 2 * chunks);

  const __m256 scale = _mm256_set1_ps(a.scale);
  int j = 0;
  for (; j + kChunk <= a.count && hd % 8 == 0; j += kChunk) {
    prefetch.Step();
    for (int g = g0; g < g1; ++g) {
      const float* key[kChunk];
      for (int i = 0; i < kChunk; ++i) key[i] = a.keys[j + i] + g * hd;
      for (int h = g * a.group; h < (g + 1) * a.group; ++h) {
        _mm256_storeu_ps(scores_of(h) + j, _mm256_mul_ps(Dot8Keys(a.q + h * hd, key, hd), scale));
      }
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
      for (int h = g * a.group; h < (g + 1) * a.group; ++h)
        AddWeightedChunk(scores_of(h) + j, value, keys, hd, out + h * hd);
    }
  }
  for (int h = g0 * a.group; h < g1 * a.group; ++h) {
    const float inv = inv_sum[h - g0 * a.group];
    for (int d = 0; d < hd; ++d) out[h * hd + d] *= inv;
  }
}

}  // namespace pdserve::model
