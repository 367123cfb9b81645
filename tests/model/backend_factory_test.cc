// CreateBackend: the device string names the backend; what it cannot serve is refused with an
// error that names the device or dtype.
#include "model/backend_factory.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "model/cuda/cuda_backend.h"
#include "model/engine.h"
#include "tests/model/random_model.h"

namespace pdserve::model {
namespace {

class BackendFactoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::SmallConfig();
    testing::WriteModel(config_, dir_.path());
  }
  testing::TempDir dir_;
  ModelConfig config_;
};

TEST_F(BackendFactoryTest, CpuIsTheCpuBackendWithThePoolAsked) {
  EngineOptions o;
  o.num_pages = 12;
  o.page_size = 8;
  o.threads = 1;
  auto backend = CreateBackend(dir_.path(), config_, o);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  EXPECT_EQ((*backend)->device(), "cpu");
  EXPECT_EQ((*backend)->kv_shape().num_pages, 12);
  EXPECT_EQ((*backend)->kv_shape().page_size, 8);
  EXPECT_FALSE((*backend)->greedy_on_device());
}

TEST_F(BackendFactoryTest, UnknownDevicesAndDtypesAreRefusedByName) {
  EngineOptions o;
  o.device = "tpu:0";
  auto tpu = CreateBackend(dir_.path(), config_, o);
  ASSERT_FALSE(tpu.ok());
  EXPECT_EQ(tpu.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tpu.status().message().find("'tpu:0'"), std::string::npos) << tpu.status().message();
  o.device = "cpu";
  o.dtype = "f8";
  auto f8 = CreateBackend(dir_.path(), config_, o);
  ASSERT_FALSE(f8.ok());
  EXPECT_NE(f8.status().message().find("'f8'"), std::string::npos) << f8.status().message();
  o.device = "cuda:0";
  o.dtype = "f32";  // a GPU holds bf16 weights
  auto gpu_f32 = CreateBackend(dir_.path(), config_, o);
  ASSERT_FALSE(gpu_f32.ok());
  EXPECT_EQ(gpu_f32.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(gpu_f32.status().message().find("bf16"), std::string::npos);
}

// What "cuda:0" gives depends on the build and the machine, and each case is checked: a build
// without the CUDA backend says so, one with it but no GPU says the device is missing, and with
// a GPU it is the CUDA backend.
TEST_F(BackendFactoryTest, CudaDevicesAreTheCudaBackendOrSayWhyNot) {
  EngineOptions o;
  o.device = "cuda:0";
  o.num_pages = 8;
  auto gpu = CreateBackend(dir_.path(), config_, o);
  if (!CudaBackendBuilt()) {
    ASSERT_FALSE(gpu.ok());
    EXPECT_EQ(gpu.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(gpu.status().message().find("built without CUDA"), std::string::npos);
  } else if (CudaDeviceCount() == 0) {
    ASSERT_FALSE(gpu.ok());
    EXPECT_NE(gpu.status().code(), StatusCode::kInternal) << gpu.status().ToString();
  } else {
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    EXPECT_EQ((*gpu)->device(), "cuda:0");
    EXPECT_TRUE((*gpu)->greedy_on_device());
  }
}

// The default greedy path (argmax of Forward's logits on the host) is the Sampler's rule.
TEST_F(BackendFactoryTest, HostGreedyIsTheArgmaxOfForwardsLogits) {
  EngineOptions o;
  o.num_pages = 8;
  o.threads = 1;
  auto backend = CreateBackend(dir_.path(), config_, o);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  const std::vector<int32_t> prompt = testing::RandomTokens(9, config_.vocab_size, 3);
  const std::vector<int32_t> pages = {0, 1};
  ForwardBatch batch;
  batch.chunks.push_back({prompt, 0, pages, true});
  batch.all_logits = true;
  std::vector<float> logits;
  ASSERT_TRUE((*backend)->Forward(batch, &logits).ok());
  std::vector<int32_t> greedy;
  ASSERT_TRUE((*backend)->ForwardGreedy(batch, &greedy).ok());
  ASSERT_EQ(greedy.size(), prompt.size());
  for (size_t r = 0; r < greedy.size(); ++r) {
    const float* row = logits.data() + r * config_.vocab_size;
    const int32_t best =
        static_cast<int32_t>(std::max_element(row, row + config_.vocab_size) - row);
    EXPECT_EQ(greedy[r], best) << "row " << r;
  }
}

}  // namespace
}  // namespace pdserve::model
