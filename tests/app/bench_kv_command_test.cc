// `pdserve bench kv` as a user runs it: a real receiver process on loopback, the TCP transport
// against the plain-socket baseline, the table on stdout and the JSON file, whose figures are
// recomputed here from its own per-iteration times. The GPU transports run where the machine has
// a GPU and say they need one where it has none.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/app/json_run.h"
#include "tests/command_run.h"
#include "tests/gpu_presence.h"

namespace pdserve {
namespace {

using pdserve::testing::Pdserve;
using pdserve::testing::PdserveJson;

// The p-th percentile of `v`, interpolated linearly between the closest ranks.
double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double rank = p / 100 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

void ExpectClose(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-9 * std::abs(want)) << what;
}

// A result row's figures against its own iterations: the medians, GB/s from them, the median
// and quartiles of the paired ratios (baseline time over KV time, iteration by iteration).
void ExpectFiguresFromIterations(const nlohmann::json& r, size_t iterations, bool paired) {
  const std::vector<double> kv = r["iterations"]["kv_us"], base = r["iterations"]["baseline_us"];
  ASSERT_EQ(kv.size(), iterations) << r.dump();
  ASSERT_EQ(base.size(), paired ? iterations : 1u) << r.dump();
  const double bytes = r["bytes"].get<double>();
  ExpectClose(r["time_us"], Percentile(kv, 50), "time_us");
  ExpectClose(r["gbps"], bytes / Percentile(kv, 50) / 1e3, "gbps");
  ExpectClose(r["baseline_gbps"], bytes / Percentile(base, 50) / 1e3, "baseline_gbps");
  std::vector<double> ratios;
  for (size_t i = 0; i < kv.size(); ++i) ratios.push_back(base[paired ? i : 0] / kv[i]);
  ExpectClose(r["ratio"],
              paired ? Percentile(ratios, 50) : Percentile(base, 50) / Percentile(kv, 50), "ratio");
  ExpectClose(r["ratio_p25"], Percentile(ratios, 25), "ratio_p25");
  ExpectClose(r["ratio_p75"], Percentile(ratios, 75), "ratio_p75");
}

TEST(BenchKvCommandTest, SweepsSizesAndWritesEveryFigureToJson) {
  auto [run, doc] = PdserveJson("bench kv --min-bytes 65536 --max-bytes 1048576 --iters 4");
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
    for (double us : r["iterations"]["kv_us"]) EXPECT_GT(us, 0.0);
    for (double us : r["iterations"]["baseline_us"]) EXPECT_GT(us, 0.0);
    ExpectFiguresFromIterations(r, 4, /*paired=*/true);
    // Each phase of a message is part of it, in the same unit.
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

// CUDA IPC where the machine has a GPU: it runs, against a device-to-device copy; where it has
// none, the command says it needs one. Never skipped: a GPU that pdserve cannot use fails here.
TEST(BenchKvCommandTest, IpcTransportRunsOnAGpuAndSaysItNeedsOneWhereThereIsNone) {
  if (pdserve::testing::GpusPresent() == 0) {
    auto run = Pdserve("bench kv --transport ipc --max-bytes 1048576");
    EXPECT_NE(run.exit_code, 0) << run.out;
    EXPECT_NE(run.out.find("needs a CUDA device"), std::string::npos) << run.out;
    return;
  }
  auto [run, doc] =
      PdserveJson("bench kv --transport ipc --min-bytes 65536 --max-bytes 1048576 --iters 3");
  ASSERT_EQ(run.exit_code, 0) << "a GPU is present, but bench kv --transport ipc failed:\n"
                              << run.out;
  EXPECT_EQ(doc["transport"], "ipc");
  ASSERT_EQ(doc["results"].size(), 5u);
  for (const auto& r : doc["results"]) ExpectFiguresFromIterations(r, 3, /*paired=*/false);
}

}  // namespace
}  // namespace pdserve
