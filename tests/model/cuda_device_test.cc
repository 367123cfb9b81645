// The CUDA device names the engine takes, cuBLAS opened at run time, and an engine refusing a
// device it cannot use. None needs a GPU; with one, a device that does not exist is refused.
#include <gtest/gtest.h>

#include <array>

#include "model/backend_factory.h"
#include "model/cuda/cuda_backend.h"
#include "model/engine.h"
#include "model/model_maker.h"
#include "tests/gpu_presence.h"
#include "tests/model/random_model.h"

#if PDSERVE_HAVE_CUDA_BACKEND
#include "model/cuda/cublas_library.h"
#endif

namespace pdserve::model {
namespace {

TEST(CudaDeviceTest, ParsesDeviceNames) {
  EXPECT_EQ(*ParseCudaDevice("cuda:0"), 0);
  EXPECT_EQ(*ParseCudaDevice("cuda:7"), 7);
  EXPECT_EQ(*ParseCudaDevice("cuda"), 0);
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cpu"}) {
    EXPECT_EQ(ParseCudaDevice(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(CudaDeviceTest, FormatsUuidsAsNvidiaSmiDoes) {
  std::array<unsigned char, 16> bytes;
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(0x10 * i + 0xa);
  EXPECT_EQ(FormatGpuUuid(bytes), "GPU-0a1a2a3a-4a5a-6a7a-8a9a-aabacadaeafa");
}

// A GPU's UUID where there is one; without the backend, a refusal that says why.
TEST(CudaDeviceTest, ReadsTheDevicesUuid) {
  auto uuid = CudaDeviceUuid(0);
  if (CudaDeviceCount() == 0) {
    EXPECT_FALSE(uuid.ok());
    return;
  }
  ASSERT_TRUE(uuid.ok()) << uuid.status().ToString();
  EXPECT_EQ(uuid->rfind("GPU-", 0), 0u) << *uuid;
  EXPECT_EQ(uuid->size(), 40u) << *uuid;
}

// cuBLAS is opened at run time, not linked: the library and every entry point must be found
// (no GPU needed).
TEST(CudaDeviceTest, CublasOpensWithEveryEntryPoint) {
#if PDSERVE_HAVE_CUDA_BACKEND
  auto cublas = cuda::Cublas();
  ASSERT_TRUE(cublas.ok()) << cublas.status().ToString();
  EXPECT_STREQ((*cublas)->GetStatusName(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
#else
  if (::pdserve::testing::GpusPresent() == 0) GTEST_SKIP() << "no GPU here, and no CUDA backend";
  FAIL() << "a GPU is present, but this build has no CUDA backend";
#endif
}

// Runs everywhere: without the backend or a device the engine says why; with one, a device
// that does not exist is refused.
TEST(CudaDeviceTest, EngineRefusesAMissingDeviceClearly) {
  testing::TempDir dir;
  MakeModelOptions m;
  m.out_dir = dir.path();
  ASSERT_TRUE(MakeModel(m).ok());
  EngineOptions o;
  o.device = "cuda:63";
  auto engine = Engine::Load(dir.path(), o);
  ASSERT_FALSE(engine.ok());
  if (!CudaBackendBuilt()) {
    EXPECT_EQ(engine.status().code(), StatusCode::kUnimplemented) << engine.status().ToString();
    EXPECT_NE(engine.status().message().find("without CUDA"), std::string::npos);
  } else {
    EXPECT_TRUE(engine.status().code() == StatusCode::kNotFound ||
                engine.status().code() == StatusCode::kFailedPrecondition)
        << engine.status().ToString();
    EXPECT_NE(engine.status().message().find("CUDA device"), std::string::npos);
  }
  o.device = "tpu:0";
  EXPECT_EQ(Engine::Load(dir.path(), o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pdserve::model
