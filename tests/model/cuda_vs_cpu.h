// What the CUDA backend's tests share: the tolerance of its logits against the CPU backend's on
// the same weights, and REQUIRE_GPU, which skips a test only where the machine has no GPU.
#pragma once

#include <gtest/gtest.h>

#include "model/backend_factory.h"
#include "model/cuda/cuda_backend.h"
#include "tests/gpu_presence.h"

namespace pdserve::model::testing {

// Largest difference over the largest CPU logit, bf16 against f32 sums.
inline constexpr double kTolerance = 2e-2;

}  // namespace pdserve::model::testing

// Skips the calling test where the machine has no GPU; where it has one, fails it unless the
// build and CUDA can use it.
#define REQUIRE_GPU()                                                                            \
  do {                                                                                           \
    if (::pdserve::testing::GpusPresent() == 0) GTEST_SKIP() << "no GPU here (no /dev/nvidiaN)"; \
    ASSERT_TRUE(::pdserve::model::CudaBackendBuilt())                                            \
        << "a GPU is present, but this build has no CUDA "                                       \
           "backend (PDSERVE_CUDA off or no toolkit with nvcc)";                                 \
    ASSERT_GT(::pdserve::model::CudaDeviceCount(), 0)                                            \
        << "a GPU is present, but cudaGetDeviceCount reports none (or fails)";                   \
  } while (0)
