// The acceptance report's parts: parsing probed versions, scaling efficiency, the dated JSON.
#include "bench/serve/acceptance.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace pdserve::bench {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::filesystem::create_directories(PDSERVE_TEST_TMP);
  std::string path = std::string(PDSERVE_TEST_TMP) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(Acceptance, ParsesNvidiaSmiAndLibraryVersions) {
  EnvironmentInfo info;
  ParseNvidiaSmiQuery("NVIDIA H100 80GB HBM3, 550.54.15\nNVIDIA H100 80GB HBM3, 550.54.15\n", info);
  EXPECT_EQ(info.gpu_model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(info.gpu_count, 2);
  EXPECT_EQ(info.driver_version, "550.54.15");
  EXPECT_EQ(ParseCudaVersion("| NVIDIA-SMI 550.54.15  Driver Version: 550.54.15  CUDA Version: "
                             "12.4     |"),
            "12.4");
  EXPECT_EQ(ParseCudaVersion("no gpu"), "none");
  EXPECT_EQ(NcclVersionFromLibraryPath("/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5"), "2.21.5");
  EXPECT_EQ(NcclVersionFromLibraryPath("/usr/lib/libfoo.so"), "none");
}

TEST(Acceptance, ProbeNeverFailsAndSaysNone) {
  EnvironmentInfo env = ProbeEnvironment("", "eu-west", "0.1.0");
  EXPECT_EQ(env.provider, "none");
  EXPECT_EQ(env.region, "eu-west");
  EXPECT_FALSE(env.hostname.empty());
  EXPECT_FALSE(env.gpu_model.empty());  // "none" without nvidia-smi
  EXPECT_FALSE(env.cuda_version.empty());
  EXPECT_FALSE(env.nccl_version.empty());
  EXPECT_EQ(env.pdserve_version, "0.1.0");
  EXPECT_EQ(env.date.size(), 20u);
}

TEST(Acceptance, ScalingEfficiencyIsT1OverTnTimesN) {
  // One worker peaks at 1000 output tok/s (best of a sweep); four at 3600: T1/(T4 x 4) = 0.9.
  std::string one = WriteTemp("one.json",
                              R"({"runs":[{"output_throughput":800,"request_throughput":8},
                  {"output_throughput":1000,"request_throughput":10},
                  {"output_throughput":900,"request_throughput":9}]})");
  std::string four =
      WriteTemp("four.json", R"({"output_throughput":3600,"request_throughput":32})");
  auto a = ReadScalingPoint(one, 1);
  auto b = ReadScalingPoint(four, 4);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->peak_output_throughput, 1000);
  auto report = ComputeScaling(*a, *b);
  ASSERT_TRUE(report.ok());
  EXPECT_DOUBLE_EQ(report->efficiency, 0.9);
  EXPECT_DOUBLE_EQ(report->efficiency_request_throughput, 0.8);
  EXPECT_FALSE(ComputeScaling(*b, *a).ok());
  EXPECT_FALSE(ReadScalingPoint(WriteTemp("zero.json", R"({"runs":[]})"), 1).ok());
  EXPECT_EQ(ReadScalingPoint("/nonexistent.json", 1).status().code(), StatusCode::kNotFound);
  // An acceptance file is read through its "serve" runs.
  std::string acc = WriteTemp("acc.json", R"({"serve":{"runs":[{"output_throughput":5}]}})");
  auto c = ReadScalingPoint(acc, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->peak_output_throughput, 5);

  EnvironmentInfo env = ProbeEnvironment("acme", "r1", "0.1.0");
  auto doc = AcceptanceJson(env, nullptr, *report);
  EXPECT_EQ(doc["kv_bandwidth"]["status"], "not_run");
  EXPECT_FALSE(doc["kv_bandwidth"]["reason"].get<std::string>().empty());
  EXPECT_DOUBLE_EQ(doc["scaling"]["efficiency"].get<double>(), 0.9);
  EXPECT_EQ(doc["provider"], "acme");
  for (const char* key : {"date", "hosts", "gpu", "driver_version", "cuda_version", "nccl_version",
                          "pdserve_version"}) {
    EXPECT_TRUE(doc.contains(key)) << key;
  }
}

}  // namespace
}  // namespace pdserve::bench
