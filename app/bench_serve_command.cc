// `pdserve bench serve`: the load generator against any OpenAI-compatible endpoint, and
// `pdserve bench fake-server`: a fake endpoint with injected delays and faults, to try the
// generator and to measure its own overhead.
#include <sys/resource.h>

#include <cstdio>
#include <memory>

#include <spdlog/spdlog.h>

#include "app/commands.h"
#include "app/token_counter.h"
#include "bench/serve/fake_openai_server.h"
#include "bench/serve/report.h"
#include "bench/serve/serve_flags.h"

namespace pdserve::app {
namespace {

// Each request in flight holds a socket: allow as many as the hard limit does.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

void RunServe(bench::ServeConfig config, const bench::ServeOutputs& outputs) {
  bench::FinishServeFlags(config, outputs);
  RaiseOpenFileLimit();
  auto counter = LoadTokenCounter(config.tokenizer_path);
  if (!counter.ok()) Fail("bench serve", counter.status());
  auto session = bench::RunServeSession(config, *counter);
  if (!session.ok()) Fail("bench serve", session.status());
  for (const bench::ServeRun& run : session->runs) {
    std::fputs(bench::SummaryTable(*session, run).c_str(), stdout);
  }
  std::fflush(stdout);
  Status written = bench::WriteSessionOutputs(*session, outputs.result_json, outputs.result_csv,
                                              outputs.result_html);
  if (!written.ok()) Fail("bench serve", written);
}

Result<bench::FakeFault> ParseFault(std::string_view name) {
  if (name == "none") return bench::FakeFault::kNone;
  if (name == "500") return bench::FakeFault::kHttp500;
  if (name == "hang") return bench::FakeFault::kHang;
  if (name == "close") return bench::FakeFault::kCloseMidStream;
  if (name == "badjson") return bench::FakeFault::kBadJson;
  return InvalidArgument(
      fmt::format("--faults: unknown fault '{}' (none, 500, hang, close, badjson)", name));
}

}  // namespace

void AddBenchServeCommand(CLI::App& bench) {
  auto config = std::make_shared<bench::ServeConfig>();
  auto outputs = std::make_shared<bench::ServeOutputs>();
  CLI::App* serve = bench.add_subcommand(
      "serve", "Load-test an OpenAI-compatible endpoint; metrics as vllm bench serve");
  bench::AddServeFlags(*serve, *config, *outputs);
  serve->callback([config, outputs] { RunServe(*config, *outputs); });

  auto fake = std::make_shared<bench::FakeServerOptions>();
  fake->port = 8000;
  auto ttft_ms = std::make_shared<double>(0);
  auto itl_ms = std::make_shared<double>(0);
  auto faults = std::make_shared<std::vector<std::string>>();
  CLI::App* server = bench.add_subcommand(
      "fake-server", "A fake OpenAI-compatible streaming server (for trying and measuring bench)");
  server->add_option("--host", fake->address, "Listen address")->capture_default_str();
  server->add_option("--port", fake->port, "Listen port (0: any)")->capture_default_str();
  server->add_option("--ttft-ms", *ttft_ms, "Delay before the first token")->capture_default_str();
  server->add_option("--itl-ms", *itl_ms, "Delay between tokens")->capture_default_str();
  server->add_option("--tokens", fake->default_tokens, "Tokens when a request sets no max_tokens")
      ->capture_default_str();
  server->add_option("--threads", fake->threads, "IO threads")->capture_default_str();
  server->add_flag("--prefix-cache", fake->prefix_cache,
                   "Report cached_tokens as one unbounded prefix cache of 16-word blocks would");
  server->add_option("--faults", *faults,
                     "Faults cycled by request: none, 500, hang, close, badjson");
  server->callback([fake, ttft_ms, itl_ms, faults] {
    fake->ttft_s = *ttft_ms / 1000;
    fake->itl_s = *itl_ms / 1000;
    for (const std::string& name : *faults) {
      auto fault = ParseFault(name);
      if (!fault.ok()) Fail("bench serve", fault.status());
      fake->faults.push_back(*fault);
    }
    auto running = bench::FakeOpenAiServer::Start(*fake);
    if (!running.ok()) Fail("bench serve", running.status());
    std::printf("fake OpenAI server listening on http://%s:%u (Ctrl-C to stop)\n",
                fake->address.c_str(), static_cast<unsigned>((*running)->port()));
    std::fflush(stdout);
    (*running)->Wait();
  });
}

}  // namespace pdserve::app
