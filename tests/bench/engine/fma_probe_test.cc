// FmaPeakGflops: a plausible multiply-add rate for both vector widths and for all the threads. A
// rate far above what a core can do would mean the chains were optimised away or the FLOPs
// miscounted; one near zero, that the timing or the count is broken.
#include "bench/engine/fma_probe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

namespace pdserve::bench {
namespace {

// One core: at most two 512-bit FMAs a cycle (64 FLOPs) at under 6 GHz.
constexpr double kMaxGflopsPerCore = 64 * 6.0;

TEST(FmaProbe, OneThreadRunsAtAPlausibleRate) {
  for (model::MatMulIsa isa : {model::MatMulIsa::kAvx2, model::MatMulIsa::kAvx512}) {
    if (isa == model::MatMulIsa::kAvx512 && !__builtin_cpu_supports("avx512f")) continue;
    const double gflops = FmaPeakGflops(1, isa);
    EXPECT_GT(gflops, 1.0) << model::MatMulIsaName(isa);
    EXPECT_LT(gflops, kMaxGflopsPerCore) << model::MatMulIsaName(isa);
  }
}

TEST(FmaProbe, AllThreadsTogetherRunAtAPlausibleRate) {
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const double all = FmaPeakGflops(threads, model::MatMulIsa::kAvx2);
  EXPECT_GT(all, 1.0);
  EXPECT_LT(all, kMaxGflopsPerCore * threads);
}

}  // namespace
}  // namespace pdserve::bench
