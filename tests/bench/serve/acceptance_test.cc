// The acceptance report's parts: parsing probed versions, the NCCL the loader finds, scaling
// efficiency, MFU, the dated JSON.
#include "bench/serve/acceptance.h"

#include "bench/serve/acceptance_environment.h"

#include <gtest/gtest.h>

#include <algorithm>
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

TEST(Acceptance, ParsesNvidiaSmiAndNcclVersions) {
  EnvironmentInfo info;
  ParseNvidiaSmiQuery("NVIDIA H100 80GB HBM3, 550.54.15\nNVIDIA H100 80GB HBM3, 550.54.15\n", info);
  EXPECT_EQ(info.gpu_model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(info.gpu_count, 2);
  EXPECT_EQ(info.driver_version, "550.54.15");
  ParseNvidiaSmiQuery("", info);
  EXPECT_EQ(info.gpu_count, 0);
  EXPECT_EQ(info.gpu_model.rfind("none", 0), 0u) << info.gpu_model;
  EXPECT_EQ(ParseCudaVersion("| NVIDIA-SMI 550.54.15  Driver Version: 550.54.15  CUDA Version: "
                             "12.4     |"),
            "12.4");
  EXPECT_EQ(ParseCudaVersion("no gpu").rfind("unknown", 0), 0u);
  EXPECT_EQ(NcclVersionName(22105), "2.21.5");
  EXPECT_EQ(NcclVersionName(2804), "2.8.4");  // before 2.9's encoding
  EXPECT_EQ(NcclVersionName(0).rfind("unknown", 0), 0u);
  // A library the loader cannot find is "not loaded", with the loader's reason.
  std::string library;
  std::string missing = LoadedNcclVersion("libnccl-that-does-not-exist.so.9", &library);
  EXPECT_EQ(missing.rfind("not loaded (", 0), 0u) << missing;
  EXPECT_NE(missing.find("libnccl-that-does-not-exist"), std::string::npos) << missing;
  EXPECT_EQ(library, "none");
}

TEST(Acceptance, ProbeNeverFailsAndMarksWhatItCannotRead) {
  EnvironmentInfo env = ProbeEnvironment("", "eu-west", "0.1.0");
  EXPECT_EQ(env.provider.rfind("unknown", 0), 0u);
  EXPECT_EQ(env.region, "eu-west");
  EXPECT_FALSE(env.hostname.empty());
  EXPECT_FALSE(env.gpu_model.empty());
  EXPECT_FALSE(env.cuda_version.empty());
  // Either a version ncclGetVersion gave ("2.x.y") or why there is none: never a bare "2".
  EXPECT_TRUE(env.nccl_version.rfind("not loaded", 0) == 0 ||
              env.nccl_version.rfind("unknown", 0) == 0 ||
              std::count(env.nccl_version.begin(), env.nccl_version.end(), '.') == 2)
      << env.nccl_version;
  EXPECT_EQ(env.pdserve_version, "0.1.0");
  EXPECT_EQ(env.date.size(), 20u);
  auto j = EnvironmentJson(env);
  EXPECT_EQ(j["nccl_version"], env.nccl_version);
  EXPECT_TRUE(j.contains("gpu_topology"));
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

  AcceptanceInputs in;
  in.env = ProbeEnvironment("acme", "r1", "0.1.0");
  in.scaling = *report;
  in.kv_bandwidth = {{"status", "not_run"}, {"reason", "skipped"}};
  in.mfu_unknown_reason = "no model shape";
  auto doc = AcceptanceJson(in);
  EXPECT_EQ(doc["kv_bandwidth"]["status"], "not_run");
  EXPECT_EQ(doc["mfu"]["status"], "unknown");
  EXPECT_DOUBLE_EQ(doc["scaling"]["efficiency"].get<double>(), 0.9);
  EXPECT_EQ(doc["provider"], "acme");
  for (const char* key : {"date", "hosts", "gpu", "driver_version", "cuda_version", "nccl_version",
                          "pdserve_version"}) {
    EXPECT_TRUE(doc.contains(key)) << key;
  }
}

// MFU from a `bench engine --json` result: FLOPs per token and the FMA peak on a CPU, the GEMM
// rate times the GPUs on a GPU; the run's token counts over its duration.
TEST(Acceptance, MfuIsModelFlopsOverThePeak) {
  std::string cpu = WriteTemp("engine_cpu.json", R"({"device":"cpu","threads":2,
      "prefill_flops_per_token":2e9,"decode_flops_per_token":3e9,"fma_gflops":100})");
  auto m = ReadMfuInputs(cpu, 8, 0);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_DOUBLE_EQ(m->peak_gflops, 100);
  // 10 s: 1000 input tokens x 2 GFLOP + 200 output tokens x 3 GFLOP = 2600 GFLOP, 260 GFLOP/s.
  nlohmann::json run = {
      {"duration", 10.0}, {"total_input_tokens", 1000}, {"total_output_tokens", 200}};
  auto mfu = RunMfu(run, *m);
  ASSERT_TRUE(mfu.ok());
  EXPECT_DOUBLE_EQ(*mfu, 2.6);
  std::string gpu = WriteTemp("engine_gpu.json", R"({"device":"cuda:0","device_name":"H200",
      "prefill_flops_per_token":2e9,"decode_flops_per_token":3e9,"matmul_tflops":0.5})");
  auto g = ReadMfuInputs(gpu, 4, 0);
  ASSERT_TRUE(g.ok());
  EXPECT_DOUBLE_EQ(g->peak_gflops, 2000);                            // 0.5 TFLOP/s x 4 GPUs
  EXPECT_DOUBLE_EQ(ReadMfuInputs(gpu, 4, 1000)->peak_gflops, 1000);  // --peak-gflops
  EXPECT_FALSE(ReadMfuInputs(WriteTemp("no_shape.json", R"({"fma_gflops":1})"), 1, 0).ok());
}

}  // namespace
}  // namespace pdserve::bench
