// Which payload path a KV sender takes for where its pools are (host or GPU memory), and the
// refusals that name --kv-path. The GPU paths themselves: gpu_transport_test.cc.
#include "kv_transfer/device_payload.h"

#include <gtest/gtest.h>

namespace pdserve::kv_transfer {
namespace {

TEST(ChoosePayloadPath, FollowsWhereThePoolsAreAndRefusesTheOtherKind) {
  EXPECT_EQ(*ChoosePayloadPath("auto", "cpu"), PayloadPath::kTcp);
  EXPECT_EQ(*ChoosePayloadPath("auto", "cuda:1"), PayloadPath::kNccl);
  EXPECT_EQ(*ChoosePayloadPath("ipc", "cuda:0"), PayloadPath::kCudaIpc);
  EXPECT_EQ(*ChoosePayloadPath("tcp", "cpu"), PayloadPath::kTcp);
  auto gpu_by_tcp = ChoosePayloadPath("tcp", "cuda:0");
  ASSERT_FALSE(gpu_by_tcp.ok());
  EXPECT_NE(gpu_by_tcp.status().message().find("GPU memory"), std::string::npos);
  auto host_by_nccl = ChoosePayloadPath("nccl", "cpu");
  ASSERT_FALSE(host_by_nccl.ok());
  EXPECT_NE(host_by_nccl.status().message().find("use tcp"), std::string::npos);
  EXPECT_FALSE(ChoosePayloadPath("rdma", "cpu").ok());
}

TEST(GpuPathTo, IpcOnlyForTheSameGpuOnTheSameMachine) {
  EXPECT_EQ(GpuPathTo("cuda:0", "boot-a", "cuda:0", "boot-a"), PayloadPath::kCudaIpc);
  EXPECT_EQ(GpuPathTo("cuda:0", "boot-a", "cuda:1", "boot-a"), PayloadPath::kNccl);
  EXPECT_EQ(GpuPathTo("cuda:0", "boot-a", "cuda:0", "boot-b"), PayloadPath::kNccl);
  EXPECT_EQ(GpuPathTo("cuda:0", "boot-a", "", ""), PayloadPath::kNccl);  // an older peer
}

}  // namespace
}  // namespace pdserve::kv_transfer
