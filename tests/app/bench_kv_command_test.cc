// `pdserve bench kv` as a user runs it: a real receiver process on loopback, the TCP transport
// against the plain-socket baseline, the table on stdout and the JSON file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/app/json_run.h"
#include "tests/command_run.h"

namespace pdserve {
namespace {

using pdserve::testing::Pdserve;
using pdserve::testing::PdserveJson;

TEST(BenchKvCommandTest, SweepsSizesAndWritesEveryFigureToJson) {
  auto [run, doc] = PdserveJson("bench kv --min-bytes 65536 --max-bytes 1048576 --iters 3");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("baseline_GB/s"), std::string::npos) << run.out;

  EXPECT_EQ(doc["transport"], "tcp");
  EXPECT_FALSE(doc["date"].get<std::string>().empty());
  EXPECT_EQ(doc["hosts"].size(), 2u);
  EXPECT_FALSE(doc["ratio_method"].get<std::string>().empty());
  EXPECT_FALSE(doc["order"].get<std::string>().empty());
  EXPECT_FALSE(doc["congestion_control"].get<std::string>().empty());
  EXPECT_TRUE(doc["pinned"].get<bool>());
  const auto& results = doc["results"];
  ASSERT_EQ(results.size(), 5u);  // 64 KiB, 128 KiB, ... 1 MiB
  uint64_t expected = 65536;
  for (const auto& r : results) {
    EXPECT_EQ(r["bytes"].get<uint64_t>(), expected);
    EXPECT_GT(r["gbps"].get<double>(), 0.0);
    EXPECT_GT(r["baseline_gbps"].get<double>(), 0.0);
    EXPECT_GT(r["ratio"].get<double>(), 0.0);
    EXPECT_GT(r["time_us"].get<double>(), 0.0);
    // The spread of the per-iteration ratios brackets their median; each phase of a message
    // is part of it, in the same unit.
    EXPECT_LE(r["ratio_p25"].get<double>(), r["ratio"].get<double>());
    EXPECT_GE(r["ratio_p75"].get<double>(), r["ratio"].get<double>());
    for (const char* phase : {"open_us", "push_us", "wait_us"}) {
      EXPECT_GT(r[phase].get<double>(), 0.0) << phase;
      EXPECT_LE(r[phase].get<double>(), r["time_us"].get<double>() * 1.0001) << phase;
    }
    EXPECT_GE(r["runs"].get<int>(), 1);
    // Each side's CPU per MiB, for the KV message and the baseline: every one does some work
    // (a receiver copies every byte), and none exceeds a second per MiB.
    for (const char* cpu : {"kv_tx_cpu_us_per_mib", "kv_rx_cpu_us_per_mib",
                            "baseline_tx_cpu_us_per_mib", "baseline_rx_cpu_us_per_mib"}) {
      EXPECT_GT(r[cpu].get<double>(), 0.0) << cpu;
      EXPECT_LT(r[cpu].get<double>(), 1e6) << cpu;
    }
    // And how busy each side was while it ran: some, and not more than its threads allow.
    for (const char* busy : {"kv_tx_busy", "kv_rx_busy", "baseline_tx_busy", "baseline_rx_busy"}) {
      EXPECT_GT(r[busy].get<double>(), 0.0) << busy;
      EXPECT_LT(r[busy].get<double>(), 16.0) << busy;
    }
    expected *= 2;
  }
  EXPECT_NE(run.out.find("rx_cpu"), std::string::npos) << run.out;
  EXPECT_FALSE(doc["offload_checksums"].get<bool>());
}

// --offload-checksums reaches both ends: each says how it checks, the run's CRCs agree (a
// mismatch fails the run), and the JSON records it. Unpinned, so each end has both CPUs here.
TEST(BenchKvCommandTest, OffloadedChecksumsReachBothEnds) {
  auto [run, doc] = PdserveJson(
      "bench kv --min-bytes 1048576 --max-bytes 4194304 --iters 2 --no-pin --offload-checksums");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(doc["offload_checksums"].get<bool>());
  EXPECT_EQ(doc["results"].size(), 3u);
  EXPECT_NE(run.out.find("chunk CRCs are computed on"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("payload CRCs are checked on"), std::string::npos) << run.out;
}

// The congestion control and the pinning a user asks for are what the run used and recorded; an
// algorithm the kernel refuses is a clear error, not a hang of the receiver process.
TEST(BenchKvCommandTest, RecordsTheCongestionControlAndPinningAsked) {
  auto [run, doc] = PdserveJson(
      "bench kv --min-bytes 65536 --max-bytes 131072 --iters 1 --congestion reno "
      "--no-pin");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("congestion control reno"), std::string::npos) << run.out;
  EXPECT_EQ(doc["congestion_control"], "reno");
  EXPECT_FALSE(doc["pinned"].get<bool>());

  auto refused = Pdserve("bench kv --max-bytes 131072 --congestion no-such-cc", 60);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.out.find("'no-such-cc' refused"), std::string::npos) << refused.out;
}

// The checksummed baseline adds its columns and fields, and its receiver checks the CRC the sender
// computed (a mismatch would fail the run).
TEST(BenchKvCommandTest, ChecksummedBaselineAddsItsFigures) {
  auto [run, doc] = PdserveJson(
      "bench kv --min-bytes 1048576 --max-bytes 2097152 --iters 2 --checksummed-baseline");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("crc_base_GB/s"), std::string::npos) << run.out;
  ASSERT_EQ(doc["results"].size(), 2u);
  for (const auto& r : doc["results"]) {
    EXPECT_GT(r["checksummed_baseline_gbps"].get<double>(), 0.0);
    EXPECT_GT(r["ratio_vs_checksummed"].get<double>(), 0.0);
  }
  auto refused = Pdserve("bench kv --transport ipc --checksummed-baseline");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.out.find("--checksummed-baseline goes with --transport tcp"), std::string::npos)
      << refused.out;
}

TEST(BenchKvCommandTest, RefusesSizesOutsideOnePageToTheMaximum) {
  auto run = Pdserve("bench kv --min-bytes 4194304 --max-bytes 1048576");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.out.find("--min-bytes"), std::string::npos) << run.out;
}

TEST(BenchKvCommandTest, GpuTransportWithoutAGpuSaysSo) {
  auto run = Pdserve("bench kv --transport ipc --max-bytes 1048576");
  if (run.exit_code == 0) GTEST_SKIP() << "this machine has a CUDA device";
  EXPECT_NE(run.out.find("needs a CUDA device"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace pdserve
