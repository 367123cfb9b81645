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

TEST(GpuPathTo, WithoutUuidsIpcOnlyForTheSameDeviceOnTheSameMachine) {
  EXPECT_EQ(GpuPathTo({"cuda:0", "boot-a", ""}, {"cuda:0", "boot-a", ""}), PayloadPath::kCudaIpc);
  EXPECT_EQ(GpuPathTo({"cuda:0", "boot-a", ""}, {"cuda:1", "boot-a", ""}), PayloadPath::kNccl);
  EXPECT_EQ(GpuPathTo({"cuda:0", "boot-a", ""}, {"cuda:0", "boot-b", ""}), PayloadPath::kNccl);
  EXPECT_EQ(GpuPathTo({"cuda:0", "boot-a", "GPU-1"}, {"", "", ""}), PayloadPath::kNccl);  // older
}

TEST(GpuPathTo, UuidsDecideWhereBothHaveOne) {
  // Two pods of one node (one boot id), each with its own GPU that it calls cuda:0.
  EXPECT_EQ(GpuPathTo({"cuda:0", "boot-a", "GPU-1111"}, {"cuda:0", "boot-a", "GPU-2222"}),
            PayloadPath::kNccl);
  // One GPU that the two processes number differently (CUDA_VISIBLE_DEVICES).
  EXPECT_EQ(GpuPathTo({"cuda:0", "boot-a", "GPU-1111"}, {"cuda:3", "boot-a", "GPU-1111"}),
            PayloadPath::kCudaIpc);
}

}  // namespace
}  // namespace pdserve::kv_transfer
