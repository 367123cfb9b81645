// The worker commands' flags as a user types them: a KV path that cannot carry the pool's memory
// is refused at once, with a message naming the flag, before a model loads or a gateway is dialled.
#include <gtest/gtest.h>

#include "tests/command_run.h"

namespace pdserve {
namespace {

using pdserve::testing::Pdserve;

TEST(ServeCommandsTest, PrefillRefusesAGpuKvPathForHostPages) {
  auto run = Pdserve("prefill --gateway 127.0.0.1:1 --kv-path nccl", 30);
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_NE(run.out.find("--kv-path nccl moves GPU memory"), std::string::npos) << run.out;
}

TEST(ServeCommandsTest, PrefillRefusesTcpForGpuPages) {
  auto run = Pdserve("prefill --gateway 127.0.0.1:1 --device cuda:0 --kv-path tcp", 30);
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_NE(run.out.find("--kv-path tcp moves host memory"), std::string::npos) << run.out;
}

TEST(ServeCommandsTest, UnknownKvPathAndDtypeAreRefusedByTheParser) {
  auto path = Pdserve("prefill --gateway 127.0.0.1:1 --kv-path rdma", 30);
  EXPECT_NE(path.exit_code, 0);
  EXPECT_NE(path.out.find("--kv-path"), std::string::npos) << path.out;
  auto dtype = Pdserve("decode --gateway 127.0.0.1:1 --dtype int4", 30);
  EXPECT_NE(dtype.exit_code, 0);
  EXPECT_NE(dtype.out.find("--dtype"), std::string::npos) << dtype.out;
}

// Workers register on the control port and are then sent prompts: beyond loopback that port
// needs a cluster token, or anyone who reaches it could join. The gateway refuses to start so.
// The planner's TTFT target is set apart from admission's refusal objective, and follows it
// when not set.
TEST(ServeCommandsTest, ThePlannersTtftTargetIsItsOwn) {
  const std::string gateway =
      "gateway --port 0 --control-port 0 --no-auth --planner advise --ttft-slo-ms 5000";
  auto apart = Pdserve(gateway + " --planner-ttft-slo-ms 800", 4);
  EXPECT_EQ(apart.exit_code, 124) << apart.out;  // it served until the time limit
  EXPECT_NE(apart.out.find("TTFT target 0.80 s"), std::string::npos) << apart.out;
  auto same = Pdserve(gateway, 4);
  EXPECT_NE(same.out.find("TTFT target 5.00 s"), std::string::npos) << same.out;
}

TEST(ServeCommandsTest, AControlPortBeyondLoopbackNeedsAClusterToken) {
  auto open = Pdserve("gateway --port 0 --control-port 0 --control-host 0.0.0.0 --no-auth", 60);
  EXPECT_EQ(open.exit_code, 1) << open.out;
  EXPECT_NE(open.out.find("set --cluster-token"), std::string::npos) << open.out;
  auto bad = Pdserve("gateway --port 0 --control-port 0 --control-host not-an-address", 60);
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("bad control address 'not-an-address'"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace pdserve
