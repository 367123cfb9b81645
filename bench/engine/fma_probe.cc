#include "bench/engine/fma_probe.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "model/simd.h"

namespace pdserve::bench {
namespace {

// Twelve independent chains hide the FMA latency (4 cycles) on two pipes with room to spare.
constexpr int kChains = 12;
constexpr long kIterations = 1 << 20;  // 12.6M FMAs a thread: a few ms

// Runs the chains and returns a lane sum, so the compiler keeps the work.
float ChainsAvx2(float seed) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(seed + c);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < kIterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  return model::HorizontalSum(sum);
}

// The same chains 16 lanes wide. A copy rather than a template: the AVX-512 target attribute
// cannot be given to one instantiation of a template only (cpu_matmul.cc pairs its kernels so).
PDSERVE_AVX512 float ChainsAvx512(float seed) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(seed + c);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < kIterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0;
  for (float lane : lanes) total += lane;
  return total;
}

}  // namespace

double FmaPeakGflops(int threads, model::MatMulIsa isa, int passes) {
  const bool wide = isa == model::MatMulIsa::kAvx512;
  const int lanes = wide ? 16 : 8;
  double best = 0;
  float sink = 0;
  for (int pass = 0; pass < std::max(1, passes); ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += wide ? ChainsAvx512(static_cast<float>(omp_get_thread_num()))
                 : ChainsAvx2(static_cast<float>(omp_get_thread_num()));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double flops = 2.0 * lanes * kChains * kIterations * threads;
    best = std::max(best, flops / seconds / 1e9);
  }
  if (sink == -1.0f) std::fputs("", stderr);  // keeps the chains from being optimised away
  return best;
}

}  // namespace pdserve::bench
