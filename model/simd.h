// Small SIMD pieces shared by the CPU kernels (cpu_matmul*, cpu_attention, cpu_backend): the
// fixed-order horizontal sum that every dot product ends with (one vector or eight at once), a
// horizontal max, a vectorised exp, and the attribute that compiles one function for AVX-512
// inside an x86-64-v3 build (callers check the CPU first).
#pragma once

#include <immintrin.h>

#include <cmath>

// For functions that use AVX-512; call them only where the CPU has it.
#define PDSERVE_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

namespace pdserve::model {

// Fixed-order horizontal sum: ((0+4)+(2+6)) + ((1+5)+(3+7)).
inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
  return _mm_cvtss_f32(s);
}

// Fixed-order dot product of two f32 vectors: 8 lanes, HorizontalSum's tree, then the n % 8 tail
// in order.
inline float Dot(const float* a, const float* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float r = HorizontalSum(acc);
  for (; i < n; ++i) r = std::fma(a[i], b[i], r);
  return r;
}

// HorizontalSum of eight vectors at once: lane i of the result is HorizontalSum(v[i]), the same
// tree and so the same bits, in about a third of the instructions.
inline __m256 HorizontalSums8(const __m256 v[8]) {
  // Lanes i and i+4 of each vector: vectors i and i+4 share a register.
  __m256 t[4];
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[i], v[i + 4], 0x20),
                         _mm256_permute2f128_ps(v[i], v[i + 4], 0x31));
  }
  // Then (0+2) and (1+3) of each.
  const __m256 u01 = _mm256_add_ps(_mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 u23 = _mm256_add_ps(_mm256_shuffle_ps(t[2], t[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(t[2], t[3], _MM_SHUFFLE(3, 2, 3, 2)));
  // Then the two together, landing in vector order.
  return _mm256_add_ps(_mm256_shuffle_ps(u01, u23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm256_shuffle_ps(u01, u23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// The ends of NR <= 8 dot products at once: y[j] = HorizontalSum(lanes[j]) (kAdd: y[j] +=),
// through HorizontalSums8 (the same bits) and one masked store. y[NR..8) is not touched.
template <int NR, bool kAdd>
inline void StoreSums(const __m256* lanes, float* y) {
  __m256 v[8];
  for (int j = 0; j < 8; ++j) v[j] = j < NR ? lanes[j] : _mm256_setzero_ps();
  const __m256i mask =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(NR), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256 sums = HorizontalSums8(v);
  if constexpr (kAdd) sums = _mm256_add_ps(_mm256_maskload_ps(y, mask), sums);
  _mm256_maskstore_ps(y, mask, sums);
}

inline float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 0x55));
  return _mm_cvtss_f32(m);
}

// e^x in each lane, within 2 ulp of expf over [-87, 88] (Cephes' expf: x = n ln2 + r with ln2
// in two parts, a degree-6 polynomial in r, then 2^n in the exponent bits). Below -87 (where
// expf goes subnormal) it gives 0; above 88 it saturates at e^88. Never a NaN for finite x.
inline __m256 Exp(__m256 x) {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_floor_ps(
      _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
}

}  // namespace pdserve::model
