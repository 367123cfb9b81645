// `pdserve bench acceptance`: a serving sweep, the KV bandwidth test (`pdserve bench kv` in a
// child process), the facts that make them reproducible (bench/serve/acceptance_environment.h),
// MFU and scaling efficiency where their inputs are given, judged against the buyer's `--require`
// thresholds and compared with an earlier run (`--compare-with`); written as one dated JSON, an
// HTML page and a text summary drawn from that JSON. Exits 0 on PASS (or with no thresholds),
// 3 on FAIL, 1 when it cannot measure.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>

#include <spdlog/spdlog.h>

#include "app/commands.h"
#include "app/token_counter.h"
#include "bench/serve/acceptance.h"
#include "bench/serve/acceptance_compare.h"
#include "bench/serve/acceptance_report.h"
#include "bench/serve/acceptance_thresholds.h"
#include "bench/serve/metrics.h"
#include "bench/serve/report.h"
#include "bench/serve/serve_flags.h"
#include "common/json_text.h"

namespace pdserve::app {
namespace {

struct AcceptanceFlags {
  std::string provider;
  std::string region;
  std::string output_dir = ".";
  std::vector<std::string> scaling_from;  // ONE_WORKER.json N_WORKERS.json
  int64_t scaling_workers = 0;            // N
  bool scaling_only = false;
  std::string kv_transport = "tcp";  // none: skip the KV bandwidth test
  std::string kv_peer;               // HOST:PORT of a `bench kv --listen` on another node
  int64_t kv_max_bytes = 64 << 20;
  std::vector<std::string> require;  // "METRIC>=VALUE" ...
  std::string compare_with;          // an earlier acceptance JSON
  std::string mfu_from;              // a `pdserve bench engine --json` result
  double peak_gflops = 0;            // replaces the engine result's peak
};

constexpr int kExitFail = 3;  // the verdict is FAIL

// Thresholds on latency percentiles the run will not measure are refused before any load.
std::vector<bench::Threshold> Thresholds(const AcceptanceFlags& flags,
                                         const bench::ServeConfig& config) {
  auto thresholds = bench::ParseThresholds(flags.require);
  if (!thresholds.ok()) Fail("bench acceptance", thresholds.status());
  auto percentiles = bench::ParsePercentiles(config.percentiles);
  if (!percentiles.ok()) Fail("bench acceptance", percentiles.status());
  for (const bench::Threshold& t : *thresholds) {
    const bool latency = t.metric.rfind("ttft_", 0) == 0 || t.metric.rfind("tpot_", 0) == 0 ||
                         t.metric.rfind("itl_", 0) == 0 || t.metric.rfind("e2el_", 0) == 0;
    size_t p = t.metric.find("_p");
    if (!latency || p == std::string::npos) continue;
    std::string label = t.metric.substr(p + 2, t.metric.rfind("_ms") - p - 2);
    bool measured = false;
    for (double q : *percentiles) measured = measured || bench::PercentileLabel(q) == label;
    if (!measured) {
      Fail("bench acceptance",
           InvalidArgument("--require " + t.text + ": percentile " + label +
                           " is not measured; add it to --metric-percentiles (now " +
                           config.percentiles + ")"));
    }
  }
  return *thresholds;
}

// Runs `pdserve bench kv` as a child process (it forks its own receiver) and reads its JSON.
nlohmann::json RunKvBench(const AcceptanceFlags& flags) {
  if (flags.kv_transport == "none") {
    return {{"status", "not_run"}, {"reason", "skipped (--kv-transport none)"}};
  }
  const std::string out = flags.output_dir + "/.kv-bench-" + std::to_string(::getpid()) + ".json";
  std::vector<std::string> args = {"pdserve",
                                   "bench",
                                   "kv",
                                   "--transport",
                                   flags.kv_transport,
                                   "--max-bytes",
                                   std::to_string(flags.kv_max_bytes),
                                   "--iters",
                                   "3",
                                   "--json",
                                   out};
  if (!flags.kv_peer.empty()) {
    args.push_back("--peer");
    args.push_back(flags.kv_peer);
  }
  std::printf("running the KV bandwidth test: pdserve bench kv --transport %s\n",
              flags.kv_transport.c_str());
  std::fflush(stdout);
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::ifstream in(out);
  nlohmann::json j = in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
  std::filesystem::remove(out);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !j.is_object()) {
    return {
        {"status", "not_run"},
        {"reason", "pdserve bench kv --transport " + flags.kv_transport + " failed (exit status " +
                       std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")"}};
  }
  j["status"] = "ok";
  j["peer"] = flags.kv_peer.empty() ? "loopback (a receiver forked on this host)" : flags.kv_peer;
  return j;
}

std::optional<bench::ScalingReport> Scaling(const AcceptanceFlags& flags) {
  if (flags.scaling_from.empty()) return std::nullopt;
  if (flags.scaling_from.size() != 2 || flags.scaling_workers < 2) {
    Fail("bench acceptance",
         InvalidArgument(
             "--scaling-from takes two files (1 worker, N workers) and --scaling-workers N >= 2"));
  }
  auto one = bench::ReadScalingPoint(flags.scaling_from[0], 1);
  if (!one.ok()) Fail("bench acceptance", one.status());
  auto many = bench::ReadScalingPoint(flags.scaling_from[1], flags.scaling_workers);
  if (!many.ok()) Fail("bench acceptance", many.status());
  auto report = bench::ComputeScaling(*one, *many);
  if (!report.ok()) Fail("bench acceptance", report.status());
  return *report;
}

void Run(bench::ServeConfig config, const bench::ServeOutputs& outputs,
         const AcceptanceFlags& flags) {
  bench::FinishServeFlags(config, outputs);
  // Everything that can be refused is refused before the load runs.
  const std::vector<bench::Threshold> thresholds = Thresholds(flags, config);
  std::optional<nlohmann::json> before;
  if (!flags.compare_with.empty()) {
    auto read = bench::ReadAcceptanceJson(flags.compare_with);
    if (!read.ok()) Fail("bench acceptance", read.status());
    before = std::move(read).value();
  }
  bench::AcceptanceInputs in;
  if (!flags.mfu_from.empty()) {
    auto mfu = bench::ReadMfuInputs(flags.mfu_from, config.gpus, flags.peak_gflops);
    if (!mfu.ok()) Fail("bench acceptance", mfu.status());
    in.mfu = *mfu;
  } else {
    in.mfu_unknown_reason =
        "the served model's FLOPs per token and the device's peak are not known: give --mfu-from "
        "a `pdserve bench engine --json` result of the model on the serving device";
  }
  in.scaling = Scaling(flags);
  in.env = bench::ProbeEnvironment(flags.provider, flags.region, PDSERVE_VERSION);
  std::optional<bench::ServeSession> session;
  if (!flags.scaling_only) {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
      limit.rlim_cur = limit.rlim_max;
      setrlimit(RLIMIT_NOFILE, &limit);
    }
    auto counter = LoadTokenCounter(config.tokenizer_path);
    if (!counter.ok()) Fail("bench acceptance", counter.status());
    auto ran = bench::RunServeSession(config, *counter);
    if (!ran.ok()) Fail("bench acceptance", ran.status());
    session = std::move(ran).value();
    for (const bench::ServeRun& run : session->runs) {
      std::fputs(bench::SummaryTable(*session, run).c_str(), stdout);
    }
    in.session = &*session;
  }
  in.kv_bandwidth = RunKvBench(flags);
  std::string stamp = in.env.date;  // 2026-11-29T18:00:00Z -> 20261129T180000Z
  std::erase(stamp, '-');
  std::erase(stamp, ':');
  std::string base = flags.output_dir + "/acceptance-" + stamp;
  nlohmann::json doc = bench::AcceptanceJson(in);
  doc["verdict"] = bench::Verdict(doc, thresholds);
  if (before) doc["comparison"] = bench::CompareAcceptance(*before, doc, flags.compare_with);
  Status s = bench::WriteTextFile(base + ".json", DumpJson(doc, 2) + "\n");
  if (!s.ok()) Fail("bench acceptance", s);
  bench::ServeSession empty;
  empty.config = config;
  empty.date = in.env.date;
  const std::string result = doc["verdict"]["result"];
  s = bench::WriteTextFile(
      base + ".html",
      bench::HtmlReport(
          "pdserve acceptance report: " + (result == "NONE" ? std::string("no verdict") : result),
          session ? *session : empty, bench::AcceptanceSections(doc)));
  if (!s.ok()) Fail("bench acceptance", s);
  const std::string text = bench::AcceptanceText(doc);
  s = bench::WriteTextFile(base + ".txt", text);
  if (!s.ok()) Fail("bench acceptance", s);
  if (session) {
    s = bench::WriteSessionOutputs(*session, outputs.result_json, outputs.result_csv,
                                   outputs.result_html);
    if (!s.ok()) Fail("bench acceptance", s);
  }
  std::fputs(text.c_str(), stdout);
  std::printf("wrote %s.json, %s.html and %s.txt\n", base.c_str(), base.c_str(), base.c_str());
  std::fflush(stdout);
  if (result == "FAIL") throw CLI::RuntimeError(kExitFail);
}

}  // namespace

void AddBenchAcceptanceCommand(CLI::App& bench) {
  auto config = std::make_shared<bench::ServeConfig>();
  config->sweep = "saturation";
  auto outputs = std::make_shared<bench::ServeOutputs>();
  auto flags = std::make_shared<AcceptanceFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "acceptance",
      "Dated acceptance report for a rented cluster: serving sweep, KV bandwidth, environment, "
      "MFU, scaling, a PASS/FAIL verdict on --require thresholds");
  bench::AddServeFlags(*cmd, *config, *outputs);
  cmd->get_option("--model")->required(false);  // not needed with --scaling-only
  cmd->add_option("--provider", flags->provider, "Provider label (free text)");
  cmd->add_option("--region", flags->region, "Region label (free text)");
  cmd->add_option("--output-dir", flags->output_dir, "Folder for acceptance-DATE.json/.html")
      ->capture_default_str();
  cmd->add_option("--scaling-from", flags->scaling_from,
                  "Two result JSONs (bench serve or acceptance): at 1 worker and at N workers")
      ->expected(2);
  cmd->add_option("--scaling-workers", flags->scaling_workers, "N, the workers of the second file");
  cmd->add_option("--kv-transport", flags->kv_transport,
                  "KV bandwidth test to run first with `pdserve bench kv`: tcp, ipc, nccl or none")
      ->check(CLI::IsMember({"tcp", "ipc", "nccl", "none"}))
      ->capture_default_str();
  cmd->add_option("--kv-peer", flags->kv_peer,
                  "HOST:PORT of a `pdserve bench kv --listen` on another node (default: loopback)");
  cmd->add_option("--kv-max-bytes", flags->kv_max_bytes, "Largest KV message")
      ->capture_default_str();
  cmd->add_option("--require", flags->require,
                  "Thresholds, e.g. \"kv_gbps_at_64MiB>=20 ttft_p99_ms<=800 goodput_rps>=5 "
                  "usd_per_1m_output_tokens<=0.9\"; the command exits 3 when one is not met");
  cmd->add_option("--compare-with", flags->compare_with,
                  "An earlier acceptance JSON: the report shows what changed since");
  cmd->add_option("--mfu-from", flags->mfu_from,
                  "A `pdserve bench engine --json` result of the served model on the serving "
                  "device: its FLOPs per token and peak give each run's MFU");
  cmd->add_option("--peak-gflops", flags->peak_gflops,
                  "The serving devices' peak GFLOP/s, replacing the --mfu-from result's");
  cmd->add_flag("--scaling-only", flags->scaling_only,
                "Skip the serving sweep; report the environment and scaling only");
  cmd->callback([config, outputs, flags] { Run(*config, *outputs, *flags); });
}

}  // namespace pdserve::app
