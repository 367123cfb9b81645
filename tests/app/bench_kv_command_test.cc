// `pdserve bench kv` as a user runs it: a real receiver process on loopback, the TCP transport
// against the plain-socket baseline, the table on stdout and the JSON file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/command_run.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using pdserve::testing::Pdserve;
using pdserve::testing::ReadFile;

TEST(BenchKvCommandTest, SweepsSizesAndWritesEveryFigureToJson) {
  model::testing::TempDir dir;
  const std::string json_path = dir / "kv.json";
  auto run =
      Pdserve("bench kv --min-bytes 65536 --max-bytes 1048576 --iters 3 --json " + json_path);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("baseline_GB/s"), std::string::npos) << run.out;

  const auto doc = nlohmann::json::parse(ReadFile(json_path));
  EXPECT_EQ(doc["transport"], "tcp");
  EXPECT_FALSE(doc["date"].get<std::string>().empty());
  EXPECT_EQ(doc["hosts"].size(), 2u);
  EXPECT_FALSE(doc["ratio_method"].get<std::string>().empty());
  const auto& results = doc["results"];
  ASSERT_EQ(results.size(), 5u);  // 64 KiB, 128 KiB, ... 1 MiB
  uint64_t expected = 65536;
  for (const auto& r : results) {
    EXPECT_EQ(r["bytes"].get<uint64_t>(), expected);
    EXPECT_GT(r["gbps"].get<double>(), 0.0);
    EXPECT_GT(r["baseline_gbps"].get<double>(), 0.0);
    EXPECT_GT(r["ratio"].get<double>(), 0.0);
    EXPECT_GT(r["time_us"].get<double>(), 0.0);
    expected *= 2;
  }
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
