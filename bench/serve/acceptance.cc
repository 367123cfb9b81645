// The acceptance JSON: scaling efficiency, MFU and every measured part in one dated document.
#include "bench/serve/acceptance.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "bench/serve/report.h"

namespace pdserve::bench {

using nlohmann::json;

const char kScalingDefinition[] =
    "T_k = W / X_k is the time k workers need for a fixed workload W at their peak sustained "
    "throughput X_k (the best output-token throughput over the run's request rates); scaling "
    "efficiency = T_1 / (T_N x N) = X_N / (N x X_1). 1.0 is linear scaling; below 1 is the share "
    "of the added workers lost to routing, KV transfer and contention.";

Result<ScalingPoint> ReadScalingPoint(const std::string& path, int64_t workers) {
  if (workers < 1) return InvalidArgument("worker counts must be >= 1");
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot open scaling result '{}'", path));
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidArgument(fmt::format("'{}' is not a result JSON object", path));
  }
  const json* runs_holder = &doc;
  if (auto serve = doc.find("serve"); serve != doc.end() && serve->is_object()) {
    runs_holder = &*serve;  // an acceptance file
  }
  std::vector<const json*> runs;
  if (auto it = runs_holder->find("runs"); it != runs_holder->end() && it->is_array()) {
    for (const json& run : *it) runs.push_back(&run);
  } else {
    runs.push_back(runs_holder);
  }
  ScalingPoint point;
  point.path = path;
  point.workers = workers;
  for (const json* run : runs) {
    if (!run->is_object()) continue;
    auto out = run->find("output_throughput");
    auto req = run->find("request_throughput");
    if (out != run->end() && out->is_number()) {
      point.peak_output_throughput = std::max(point.peak_output_throughput, out->get<double>());
    }
    if (req != run->end() && req->is_number()) {
      point.peak_request_throughput = std::max(point.peak_request_throughput, req->get<double>());
    }
  }
  if (!(point.peak_output_throughput > 0)) {
    return InvalidArgument(fmt::format("'{}' holds no run with output_throughput > 0", path));
  }
  return point;
}

Result<ScalingReport> ComputeScaling(const ScalingPoint& one, const ScalingPoint& many) {
  if (one.workers != 1) {
    return InvalidArgument("the first scaling result must be at 1 worker");
  }
  if (many.workers < 2) return InvalidArgument("the second scaling result needs N >= 2 workers");
  if (!(one.peak_output_throughput > 0) || !(many.peak_output_throughput > 0)) {
    return InvalidArgument("scaling needs throughputs > 0");
  }
  ScalingReport report{one, many};
  double n = static_cast<double>(many.workers);
  // T_k = W / X_k, so T_1 / (T_N * N) = X_N / (N * X_1).
  report.efficiency = many.peak_output_throughput / (n * one.peak_output_throughput);
  if (one.peak_request_throughput > 0) {
    report.efficiency_request_throughput =
        many.peak_request_throughput / (n * one.peak_request_throughput);
  }
  return report;
}

Result<MfuInputs> ReadMfuInputs(const std::string& path, int64_t gpus, double peak_gflops) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot open engine result '{}'", path));
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidArgument(fmt::format("'{}' is not a JSON object", path));
  }
  MfuInputs m;
  m.source = path;
  m.prefill_flops_per_token = doc.value("prefill_flops_per_token", 0.0);
  m.decode_flops_per_token = doc.value("decode_flops_per_token", 0.0);
  if (!(m.prefill_flops_per_token > 0) || !(m.decode_flops_per_token > 0)) {
    return InvalidArgument(fmt::format(
        "'{}' has no prefill/decode_flops_per_token: not a `pdserve bench engine --json` result",
        path));
  }
  const std::string device = doc.value("device", "cpu");
  if (peak_gflops > 0) {
    m.peak_gflops = peak_gflops;
    m.peak_source = "given (--peak-gflops)";
  } else if (device.rfind("cuda", 0) == 0) {
    const double per_gpu = doc.value("matmul_tflops", 0.0) * 1e3;
    m.peak_gflops = per_gpu * static_cast<double>(std::max<int64_t>(1, gpus));
    m.peak_source = fmt::format("bf16 GEMM rate of {} ({:.1f} TFLOP/s) x {} GPUs",
                                doc.value("device_name", device), per_gpu / 1e3, gpus);
  } else {
    m.peak_gflops = doc.value("fma_gflops", 0.0);
    m.peak_source = fmt::format("FMA peak of {} CPU threads on {}", doc.value("threads", 0),
                                doc.value("host", std::string("the engine's host")));
  }
  if (!(m.peak_gflops > 0)) {
    return InvalidArgument(
        fmt::format("'{}' holds no device peak (fma_gflops, matmul_tflops)", path));
  }
  return m;
}

Result<double> RunMfu(const json& run, const MfuInputs& mfu) {
  const double duration = run.value("duration", 0.0);
  if (!(duration > 0) || !(mfu.peak_gflops > 0)) {
    return InvalidArgument("MFU needs a run duration and a peak");
  }
  const double flops = mfu.prefill_flops_per_token * run.value("total_input_tokens", 0.0) +
                       mfu.decode_flops_per_token * run.value("total_output_tokens", 0.0);
  return flops / duration / (mfu.peak_gflops * 1e9);
}

json AcceptanceJson(const AcceptanceInputs& in) {
  const EnvironmentInfo& env = in.env;
  json hosts = json::array();
  hosts.push_back({{"role", "acceptance runner (load generator, KV sender)"},
                   {"hostname", env.hostname},
                   {"node_id", env.node_id},
                   {"os", env.os},
                   {"gpu_model", env.gpu_model},
                   {"driver_version", env.driver_version},
                   {"nccl_version", env.nccl_version}});
  if (in.session != nullptr) {
    hosts.push_back({{"role", "serving target"}, {"address", in.session->config.base_url}});
  }
  if (in.kv_bandwidth.value("status", "") == "ok") {
    const json kv_hosts = in.kv_bandwidth.value("hosts", json::array());
    json receiver = {{"role", "KV receiver"},
                     {"hostname", kv_hosts.size() > 1 ? kv_hosts[1] : json("unknown")},
                     {"address", in.kv_bandwidth.value("peer", json("unknown"))}};
    // What the receiving end reported of itself (bench kv's hello).
    const json facts = in.kv_bandwidth.value("receiver", json::object());
    for (const auto& [key, value] : facts.items()) {
      if (key != "host") receiver[key] = value;
    }
    hosts.push_back(std::move(receiver));
  }
  json j = {{"kind", "pdserve_acceptance"},
            {"date", env.date},
            {"provider", env.provider},
            {"region", env.region},
            {"hosts", hosts},
            {"environment", EnvironmentJson(env)},
            {"gpu",
             {{"model", env.gpu_model},
              {"count", env.gpu_count >= 0 ? json(env.gpu_count) : json(nullptr)}}},
            {"driver_version", env.driver_version},
            {"cuda_version", env.cuda_version},
            {"nccl_version", env.nccl_version},
            {"pdserve_version", env.pdserve_version},
            {"kv_bandwidth", in.kv_bandwidth}};
  j["serve"] = in.session ? SessionResultJson(*in.session) : json(nullptr);
  if (in.session && in.session->runs.size() == 1) {
    j["serve"] = {{"runs", json::array({j["serve"]})}};  // always a list of runs
  }
  if (in.mfu) {
    j["mfu"] = {{"source", in.mfu->source},
                {"prefill_flops_per_token", in.mfu->prefill_flops_per_token},
                {"decode_flops_per_token", in.mfu->decode_flops_per_token},
                {"peak_gflops", in.mfu->peak_gflops},
                {"peak_source", in.mfu->peak_source},
                {"definition",
                 "(prefill FLOPs/token x input tokens + decode FLOPs/token x output tokens) / "
                 "run duration / peak FLOP/s; matrix FLOPs only (2 per weight), attention not "
                 "counted"}};
    if (j["serve"].is_object()) {
      for (json& run : j["serve"]["runs"]) {
        auto mfu = RunMfu(run, *in.mfu);
        run["mfu"] = mfu.ok() ? json(*mfu) : json(nullptr);
      }
    }
  } else {
    j["mfu"] = {{"status", "unknown"}, {"reason", in.mfu_unknown_reason}};
  }
  const std::optional<ScalingReport>& scaling = in.scaling;
  if (scaling) {
    j["scaling"] = {{"definition", kScalingDefinition},
                    {"one_worker",
                     {{"file", scaling->one.path},
                      {"peak_output_throughput", scaling->one.peak_output_throughput},
                      {"peak_request_throughput", scaling->one.peak_request_throughput}}},
                    {"n_workers",
                     {{"file", scaling->many.path},
                      {"workers", scaling->many.workers},
                      {"peak_output_throughput", scaling->many.peak_output_throughput},
                      {"peak_request_throughput", scaling->many.peak_request_throughput}}},
                    {"efficiency", scaling->efficiency},
                    {"efficiency_request_throughput", scaling->efficiency_request_throughput}};
  } else {
    j["scaling"] = {
        {"status", "not_computed"},
        {"reason", "give --scaling-from ONE_WORKER.json N_WORKERS.json and --scaling-workers N"}};
  }
  return j;
}

}  // namespace pdserve::bench
