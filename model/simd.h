// Small SIMD pieces shared by the CPU kernels (cpu_matmul*, cpu_backend): the fixed-order
// horizontal sum that every dot product ends with, and the attribute that compiles one function
// for AVX-512 inside an x86-64-v3 build (callers check the CPU first).
#pragma once

#include <immintrin.h>

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

}  // namespace pdserve::model
