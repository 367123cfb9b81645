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
// AVX-512 caller compiles it with 32 vector registers, where G = 3 fits (24 sums). slot() runs
// once per 8 columns (LineFeed).
template <int G, typename Slot>
__attribute__((always_inline)) inline void Dot8Keys(const float* const q[G],
                                                    const float* const key[kChunk], int n,
                                                    __m256 scores[G], const Slot& slot) {
  __m256 acc[G][kChunk];
  for (int h = 0; h < G; ++h)
    for (int i = 0; i < kChunk; ++i) acc[h][i] = _mm256_setzero_ps();
  for (int d = 0; d < n; d += 8) {
    slot();
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

// out[h][d, d + 64) for G heads at once on AVX-512, over all `count` keys: per chunk of 8 keys,
// a multiply-add chain from zero in key order, then added to a total that started at zero. Those
// are AddWeightedChunk's operations on each element (its chunk sum, then the add into out, which
// the caller zeroed), so the same bits, 16 columns to a register. The totals stay in registers
// from the first chunk to the last; written to out once, they do not go through memory between
// chunks, and G heads share each value load. slot() runs once per key (LineFeed).
template <int G, typename Slot>
PDSERVE_AVX512 void AddWeightedRows512(const float* const p[G], const float* const* value,
                                       int count, int column, float* const out[G],
                                       const Slot& slot) {
  constexpr int kRegs = 4;  // 64 columns: G * 4 totals and G * 4 chunk sums
  __m512 total[G][kRegs];
  for (int h = 0; h < G; ++h)
    for (int r = 0; r < kRegs; ++r) total[h][r] = _mm512_setzero_ps();
  for (int j = 0; j < count; j += kChunk) {
    const int keys = std::min(kChunk, count - j);
    __m512 acc[G][kRegs];
    for (int h = 0; h < G; ++h)
      for (int r = 0; r < kRegs; ++r) acc[h][r] = _mm512_setzero_ps();
    for (int i = 0; i < keys; ++i) {
      slot();
      const float* v = value[j + i] + column;
      __m512 pi[G];
      for (int h = 0; h < G; ++h) pi[h] = _mm512_set1_ps(p[h][j + i]);
      for (int r = 0; r < kRegs; ++r) {
        const __m512 vv = _mm512_loadu_ps(v + 16 * r);
        for (int h = 0; h < G; ++h) acc[h][r] = _mm512_fmadd_ps(pi[h], vv, acc[h][r]);
      }
    }
    for (int h = 0; h < G; ++h)
      for (int r = 0; r < kRegs; ++r) total[h][r] = _mm512_add_ps(total[h][r], acc[h][r]);
  }
  for (int h = 0; h < G; ++h)
    for (int r = 0; r < kRegs; ++r) _mm512_storeu_ps(out[h] + 16 * r, total[h][r]);
}

// Prefetches the next call's rows a few cache lines at a time from inside the arithmetic's inner
// loops: one "slot" is a step of 8 columns of the scores or one key of the values. Spread that
// thin, the misses overlap the sums; issued in bursts between chunks, they would fill the core's
// line fill buffers and stall it until the lines came in.
//
// The lines go out as kStreams sequential streams, each walking its own part of the rows, one
// line of each in turn: the L2 streamer runs ahead of each stream it sees, so several at once
// keep more lines in flight than the fill buffers hold (the reason decode's products walk four
// runs of rows). Both choices are measured in docs/benchmarks.md (CPU engine, Attention).
//
// Only the first kMaxPrefetchBytes are fetched, over the call's last slots: fetched further
// ahead, the next token's first rows would leave the cache again, pushed out by this token's own
// (a long context's rows are megabytes); past them, the hardware prefetchers follow the rows'
// pages on their own.
class LineFeed {
 public:
  static constexpr size_t kMaxPrefetchBytes = 512 * 1024;
  static constexpr int kStreams = 4;

  // `slots`: how many times the call will call Slot.
  LineFeed(std::span<const MemoryRegion> regions, size_t slots) : regions_(regions) {
    size_t lines = 0;
    for (const MemoryRegion& r : regions) lines += LinesOf(r);
    lines = std::min(lines, kMaxPrefetchBytes / 64);
    if (lines == 0) return;
    left_ = lines;
    slots = std::max<size_t>(slots, 1);
    per_slot_ = (lines + slots - 1) / slots;
    idle_ = slots - std::min(slots, (lines + per_slot_ - 1) / per_slot_);
    // Stream s walks lines [s * part, (s + 1) * part) of the regions taken in order.
    const size_t part = (lines + kStreams - 1) / kStreams;
    size_t region = 0, first = 0;  // first: the number of lines in the regions before `region`
    for (int s = 0; s < kStreams && s * part < lines; ++s) {
      const size_t begin = s * part;
      while (first + LinesOf(regions[region]) <= begin) first += LinesOf(regions[region++]);
      const char* data = static_cast<const char*>(regions[region].data);
      streams_[s] = {region, data + (begin - first) * 64, data + regions[region].bytes,
                     std::min(part, lines - begin)};
    }
  }

  __attribute__((always_inline)) void Slot() {
    if (idle_ > 0) {
      --idle_;
      return;
    }
    for (size_t n = 0; n < per_slot_ && left_ > 0;) {
      Stream& s = streams_[next_];
      next_ = next_ + 1 == kStreams ? 0 : next_ + 1;
      if (s.left == 0) continue;  // a finished stream's turn costs the slot nothing
      ++n;
      --left_;
      while (s.at >= s.end) {  // lines are left, so a later region holds them
        const MemoryRegion& r = regions_[++s.region];
        s.at = static_cast<const char*>(r.data);
        s.end = s.at + r.bytes;
      }
      _mm_prefetch(s.at, _MM_HINT_T0);
      s.at += 64;
      --s.left;
    }
  }

 private:
  struct Stream {
    size_t region = 0;
    const char* at = nullptr;
    const char* end = nullptr;
    size_t left = 0;  // lines still to prefetch
  };

  static size_t LinesOf(const MemoryRegion& r) { return (r.bytes + 63) / 64; }

  std::span<const MemoryRegion> regions_;
  Stream streams_[kStreams];
  int next_ = 0;
  size_t left_ = 0;  // lines still to prefetch, all streams together
  size_t per_slot_ = 0, idle_ = 0;
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

  // The next call's rows are fetched a few lines per slot (LineFeed): one per 8 columns of each
  // score pass and, on AVX-512, one per key of each value pass; on AVX2 one per chunk and head.
  const int chunks = (a.count + kChunk - 1) / kChunk;
  const int full_chunks = hd % 8 == 0 ? a.count / kChunk : 0;
  const size_t kv_heads = g1 - g0;
  const size_t score_slots = static_cast<size_t>(full_chunks) * kv_heads *
                             ((a.group + kHeadsAtOnce - 1) / kHeadsAtOnce) * (hd / 8);
  const size_t value_slots = kWide ? kv_heads * ((a.group + 2) / 3) * a.count * (hd / 64)
                                   : static_cast<size_t>(chunks) * kv_heads * a.group;
  LineFeed feed(a.prefetch, score_slots + value_slots);
  const auto slot = [&] { feed.Slot(); };

  // Scores, chunk by chunk: a chunk's rows are read once for every covered head.
  const __m256 scale = _mm256_set1_ps(a.scale);
  int j = 0;
  for (; j < full_chunks * kChunk; j += kChunk) {
    for (int g = g0; g < g1; ++g) {
      const float* key[kChunk];
      for (int i = 0; i < kChunk; ++i) key[i] = a.keys[j + i] + g * hd;
      ForHeadRuns<kHeadsAtOnce>(g * a.group, (g + 1) * a.group, [&]<int G>(int h) {
        const float* q[G];
        for (int e = 0; e < G; ++e) q[e] = a.q + (h + e) * hd;
        __m256 sums[G];
        Dot8Keys<G>(q, key, hd, sums, slot);
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

  // Values: every output starts at zero and takes each chunk's sum in turn.
  for (int h = g0 * a.group; h < g1 * a.group; ++h) std::fill_n(out + h * hd, hd, 0.0f);
  if constexpr (kWide) {
    // A KV head's query heads three at a time over all the keys, 64 columns at a time; the
    // columns past the last 64 (head_dim not a multiple of 64), chunk by chunk through out.
    const int wide = hd / 64 * 64;
    for (int g = g0; g < g1; ++g) {
      ForHeadRuns<3>(g * a.group, (g + 1) * a.group, [&]<int G>(int h) {
        const float* p[G];
        float* o[G];
        for (int e = 0; e < G; ++e) p[e] = scores_of(h + e);
        for (int d = 0; d < wide; d += 64) {
          for (int e = 0; e < G; ++e) o[e] = out + (h + e) * hd + d;
          AddWeightedRows512<G>(p, a.values, a.count, g * hd + d, o, slot);
        }
        if (wide == hd) return;
        for (int c = 0; c < a.count; c += kChunk) {
          const int keys = std::min(kChunk, a.count - c);
          const float* value[kChunk];
          for (int i = 0; i < keys; ++i) value[i] = a.values[c + i] + g * hd + wide;
          for (int e = 0; e < G; ++e)
            AddWeightedChunk(p[e] + c, value, keys, hd - wide, out + (h + e) * hd + wide);
        }
      });
    }
  } else {
    for (j = 0; j < a.count; j += kChunk) {
      const int keys = std::min(kChunk, a.count - j);
      for (int g = g0; g < g1; ++g) {
        const float* value[kChunk];
        for (int i = 0; i < keys; ++i) value[i] = a.values[j + i] + g * hd;
        for (int h = g * a.group; h < (g + 1) * a.group; ++h) {
          slot();
          AddWeightedChunk(scores_of(h) + j, value, keys, hd, out + h * hd);
        }
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
