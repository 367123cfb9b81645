// `pdserve bench acceptance`: a serving sweep plus the facts that make it reproducible (date,
// provider, region, host, GPUs, driver, CUDA, NCCL, pdserve version), the KV bandwidth test's
// status and, given results at 1 and N workers, the scaling efficiency; written as one dated JSON
// and one HTML page. See bench/acceptance.h for the definition of scaling efficiency.
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
};

// Runs `pdserve bench kv` as a child process (it forks its own receiver) and reads its JSON.
void RunKvBench(const AcceptanceFlags& flags, nlohmann::json* kv, std::string* reason) {
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
    *reason = "pdserve bench kv --transport " + flags.kv_transport + " failed (exit status " +
              std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")";
    return;
  }
  *kv = std::move(j);
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
  std::optional<bench::ScalingReport> scaling = Scaling(flags);
  bench::EnvironmentInfo env =
      bench::ProbeEnvironment(flags.provider, flags.region, PDSERVE_VERSION);
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
  }
  nlohmann::json kv = nullptr;
  std::string kv_reason = bench::kKvBandwidthNotRunReason;
  if (flags.kv_transport != "none") RunKvBench(flags, &kv, &kv_reason);
  std::string stamp = env.date;  // 2026-11-29T18:00:00Z -> 20261129T180000Z
  std::erase(stamp, '-');
  std::erase(stamp, ':');
  std::string base = flags.output_dir + "/acceptance-" + stamp;
  nlohmann::json doc =
      bench::AcceptanceJson(env, session ? &*session : nullptr, scaling, kv, kv_reason);
  Status s = bench::WriteTextFile(base + ".json", DumpJson(doc, 2) + "\n");
  if (!s.ok()) Fail("bench acceptance", s);
  bench::ServeSession empty;
  empty.config = config;
  empty.date = env.date;
  s = bench::WriteTextFile(
      base + ".html", bench::HtmlReport("pdserve acceptance report", session ? *session : empty,
                                        bench::AcceptanceSections(env, scaling)));
  if (!s.ok()) Fail("bench acceptance", s);
  if (session) {
    s = bench::WriteSessionOutputs(*session, outputs.result_json, outputs.result_csv,
                                   outputs.result_html);
    if (!s.ok()) Fail("bench acceptance", s);
  }
  if (scaling) {
    std::printf("scaling efficiency T1/(TN x N) at N=%lld: %.3f (requests/s: %.3f)\n",
                static_cast<long long>(scaling->many.workers), scaling->efficiency,
                scaling->efficiency_request_throughput);
  }
  if (kv.is_object()) {
    std::printf("KV bandwidth (%s): %zu message sizes, see kv_bandwidth in the report\n",
                flags.kv_transport.c_str(), kv.value("results", nlohmann::json::array()).size());
  } else {
    std::printf("KV bandwidth: not run (%s)\n", kv_reason.c_str());
  }
  std::printf("wrote %s.json and %s.html\n", base.c_str(), base.c_str());
}

}  // namespace

void AddBenchAcceptanceCommand(CLI::App& bench) {
  auto config = std::make_shared<bench::ServeConfig>();
  config->sweep = "saturation";
  auto outputs = std::make_shared<bench::ServeOutputs>();
  auto flags = std::make_shared<AcceptanceFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "acceptance",
      "Dated acceptance report for a rented cluster: serving sweep, environment, "
      "scaling efficiency");
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
  cmd->add_flag("--scaling-only", flags->scaling_only,
                "Skip the serving sweep; report the environment and scaling only");
  cmd->callback([config, outputs, flags] { Run(*config, *outputs, *flags); });
}

}  // namespace pdserve::app
