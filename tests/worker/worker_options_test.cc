// LoadWorkerEngine salts the prefix cache's block keys with the layout of the backend it loaded,
// the one the worker registers, so that the gateway's keys for a prompt are the engine's: on a
// simulated backend, whose pages are not the model's, as on the CPU.
#include "worker/worker_options.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "common/block_key.h"
#include "common/framed_connection.h"
#include "model/cuda/cuda_backend.h"
#include "tests/model/random_model.h"
#include "tests/temp_dir.h"

namespace pdserve::worker {
namespace {

// Stands for the workers' KV layout hash: any function of the config and the pool's shape.
Result<uint64_t> LayoutHash(const model::ModelConfig& config, const model::KvCacheShape& shape) {
  return uint64_t(config.n_layers) * 1'000'003 + uint64_t(config.n_kv_heads) * 10'007 +
         uint64_t(config.head_dim) * 101 + uint64_t(shape.page_size) * 7 +
         static_cast<uint64_t>(shape.dtype);
}

void ExpectGatewayKeysAreTheEngines(const std::string& device) {
  testing::TempDir dir;
  const model::ModelConfig config = model::testing::SmallConfig();
  model::testing::WriteModel(config, dir.path());
  model::EngineOptions options;
  options.device = device;
  options.num_pages = 64;
  options.threads = 1;
  auto engine = LoadWorkerEngine(dir.path(), options, LayoutHash);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  // What the worker registers (prefill_pool/prefill_worker.cc, decode_pool/worker.cc): the
  // layout of the loaded engine's config and pool.
  auto registered = LayoutHash((*engine)->config(), (*engine)->backend().kv_shape());
  ASSERT_TRUE(registered.ok());
  const std::vector<int32_t> prompt = model::testing::RandomTokens(70, config.vocab_size, 3);
  EXPECT_EQ((*engine)->BlockKeys(prompt), PromptBlockKeys(*registered, prompt, 16));
}

TEST(LoadWorkerEngineTest, TheGatewaysKeysAreTheEnginesOnTheCpu) {
  ExpectGatewayKeysAreTheEngines("cpu");
}

// The simulated backend's pages hold one value a token, so its config and layout are not the
// model directory's: the salt must come from the backend, not from config.json.
TEST(LoadWorkerEngineTest, TheGatewaysKeysAreTheEnginesOnASimulatedBackend) {
  ExpectGatewayKeysAreTheEngines("sim:zero");
}

// --metrics-address: /metrics listens where it is told (a pod's every interface), not only on
// 127.0.0.1. 127.0.0.2 is loopback too, so the test needs no network.
TEST(StartWorkerMetricsTest, BindsTheAddressItIsGiven) {
  SharedWorkerOptions options;
  options.metrics_port = 0;
  options.metrics_address = "127.0.0.2";
  auto metrics = StartWorkerMetrics(options, "decode");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  ASSERT_TRUE(*metrics);
  boost::asio::io_context io;
  const uint16_t port = (*metrics)->port();
  EXPECT_TRUE(DialTcp(io, "127.0.0.2", port, std::chrono::milliseconds(2000)).ok());
  EXPECT_FALSE(DialTcp(io, "127.0.0.1", port, std::chrono::milliseconds(200)).ok());

  options.metrics_address = "not-an-address";
  EXPECT_FALSE(StartWorkerMetrics(options, "decode").ok());
  options.metrics_port = -1;
  auto off = StartWorkerMetrics(options, "decode");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(*off);
}

TEST(GpuUuidOfTest, OnlyCudaDevicesHaveOne) {
  EXPECT_EQ(*GpuUuidOf("cpu"), "");
  EXPECT_EQ(*GpuUuidOf("sim:zero"), "");
  auto gpu = GpuUuidOf("cuda:0");
  if (model::CudaDeviceCount() == 0) {
    EXPECT_FALSE(gpu.ok());
  } else {
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    EXPECT_EQ(gpu->rfind("GPU-", 0), 0u);
  }
}

}  // namespace
}  // namespace pdserve::worker
