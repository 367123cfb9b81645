#include "bench/serve/acceptance.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
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

const char kKvBandwidthNotRunReason[] = "skipped (--kv-transport none)";

namespace {

std::string Trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// The standard output of a shell command, or nullopt when it cannot run or fails.
std::optional<std::string> CommandOutput(const std::string& command) {
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  int rc = pclose(pipe);
  if (rc != 0) return std::nullopt;
  return out;
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "none";
  line = Trim(line);
  return line.empty() ? "none" : line;
}

std::string OrNone(std::string s) { return s.empty() ? "none" : s; }

}  // namespace

void ParseNvidiaSmiQuery(std::string_view csv, EnvironmentInfo& info) {
  std::istringstream lines{std::string(csv)};
  std::string line;
  info.gpu_count = 0;
  while (std::getline(lines, line)) {
    line = Trim(line);
    if (line.empty()) continue;
    size_t comma = line.rfind(',');
    std::string name = Trim(line.substr(0, comma));
    std::string driver = comma == std::string::npos ? "" : Trim(line.substr(comma + 1));
    if (info.gpu_count == 0) {
      info.gpu_model = OrNone(name);
      info.driver_version = OrNone(driver);
    } else if (name != info.gpu_model) {
      info.gpu_model += " / " + name;  // a mixed node: say so
    }
    ++info.gpu_count;
  }
}

std::string ParseCudaVersion(std::string_view banner) {
  constexpr std::string_view kKey = "CUDA Version:";
  size_t at = banner.find(kKey);
  if (at == std::string_view::npos) return "none";
  std::string_view rest = banner.substr(at + kKey.size());
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  size_t end = rest.find_first_not_of("0123456789.");
  return OrNone(std::string(rest.substr(0, end)));
}

std::string NcclVersionFromLibraryPath(std::string_view path) {
  constexpr std::string_view kKey = "libnccl.so.";
  size_t at = path.rfind(kKey);
  if (at == std::string_view::npos) return "none";
  std::string version(path.substr(at + kKey.size()));
  if (version.empty() || version.find_first_not_of("0123456789.") != std::string::npos) {
    return "none";
  }
  return version;
}

EnvironmentInfo ProbeEnvironment(const std::string& provider, const std::string& region,
                                 const std::string& pdserve_version) {
  EnvironmentInfo info;
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  info.date = date;
  info.provider = OrNone(provider);
  info.region = OrNone(region);
  char host[256] = {};
  info.hostname = gethostname(host, sizeof host - 1) == 0 ? OrNone(host) : "none";
  info.node_id = ReadFirstLine("/etc/machine-id");
  utsname u{};
  info.os = uname(&u) == 0 ? fmt::format("{} {} {}", u.sysname, u.release, u.machine) : "none";
  info.gpu_model = info.driver_version = info.cuda_version = "none";
  if (auto q = CommandOutput("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader")) {
    ParseNvidiaSmiQuery(*q, info);
  }
  if (auto banner = CommandOutput("nvidia-smi")) info.cuda_version = ParseCudaVersion(*banner);
  info.nccl_version = "none";
  if (const char* env = std::getenv("NCCL_VERSION"); env != nullptr && *env != '\0') {
    info.nccl_version = env;
  } else if (auto libs = CommandOutput("ldconfig -p")) {
    std::istringstream lines(*libs);
    std::string line;
    while (std::getline(lines, line)) {
      size_t arrow = line.find("=> ");
      if (line.find("libnccl.so") == std::string::npos || arrow == std::string::npos) continue;
      std::error_code ec;
      auto real = std::filesystem::canonical(Trim(line.substr(arrow + 3)), ec);
      if (!ec) info.nccl_version = NcclVersionFromLibraryPath(real.string());
      if (info.nccl_version != "none") break;
    }
  }
  info.pdserve_version = OrNone(pdserve_version);
  return info;
}

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

json AcceptanceJson(const EnvironmentInfo& env, const ServeSession* session,
                    const std::optional<ScalingReport>& scaling, const json& kv_bandwidth,
                    const std::string& kv_not_run_reason) {
  json j = {{"kind", "pdserve_acceptance"},
            {"date", env.date},
            {"provider", env.provider},
            {"region", env.region},
            {"hosts", {{{"hostname", env.hostname}, {"node_id", env.node_id}, {"os", env.os}}}},
            {"gpu", {{"model", env.gpu_model}, {"count", env.gpu_count}}},
            {"driver_version", env.driver_version},
            {"cuda_version", env.cuda_version},
            {"nccl_version", env.nccl_version},
            {"pdserve_version", env.pdserve_version},
            {"kv_bandwidth", {{"status", "not_run"}, {"reason", kv_not_run_reason}}}};
  if (kv_bandwidth.is_object()) {
    j["kv_bandwidth"] = kv_bandwidth;
    j["kv_bandwidth"]["status"] = "ok";
  }
  j["serve"] = session ? SessionResultJson(*session) : json(nullptr);
  if (session && session->runs.size() == 1) {
    j["serve"] = {{"runs", json::array({j["serve"]})}};  // always a list of runs
  }
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

std::vector<HtmlSection> AcceptanceSections(const EnvironmentInfo& env,
                                            const std::optional<ScalingReport>& scaling) {
  std::vector<HtmlSection> sections;
  sections.push_back({"Environment",
                      {{"date", env.date},
                       {"provider", env.provider},
                       {"region", env.region},
                       {"host", env.hostname},
                       {"node id", env.node_id},
                       {"OS", env.os},
                       {"GPU", fmt::format("{} x {}", env.gpu_count, env.gpu_model)},
                       {"driver", env.driver_version},
                       {"CUDA", env.cuda_version},
                       {"NCCL", env.nccl_version},
                       {"pdserve", env.pdserve_version}}});
  sections.push_back(
      {"KV bandwidth", {{"status", "not run"}, {"reason", kKvBandwidthNotRunReason}}});
  if (scaling) {
    sections.push_back(
        {"Scaling",
         {{"1 worker", fmt::format("{:.1f} output tok/s peak ({})",
                                   scaling->one.peak_output_throughput, scaling->one.path)},
          {fmt::format("{} workers", scaling->many.workers),
           fmt::format("{:.1f} output tok/s peak ({})", scaling->many.peak_output_throughput,
                       scaling->many.path)},
          {"efficiency T1 / (TN x N)", fmt::format("{:.3f}", scaling->efficiency)},
          {"same on requests/s", fmt::format("{:.3f}", scaling->efficiency_request_throughput)},
          {"definition", kScalingDefinition}}});
  } else {
    sections.push_back({"Scaling", {{"status", "not computed: no --scaling-from results"}}});
  }
  return sections;
}

}  // namespace pdserve::bench
