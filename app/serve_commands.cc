// `pdserve gateway`, `pdserve decode` (colocated: --role both) and `pdserve up`: the serving
// processes. `up` runs a gateway and workers as child processes of its own on localhost.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/commands.h"
#include "common/logging.h"
#include "decode_pool/worker.h"
#include "gateway/gateway_server.h"
#include "model/model_maker.h"

namespace pdserve::app {
namespace {

[[noreturn]] void Fail(const char* command, const Status& s) {
  std::cerr << "pdserve " << command << ": " << s.ToString() << "\n";
  throw CLI::RuntimeError(1);
}

std::string ModelOrBuiltin(const char* command, const std::string& dir) {
  if (!dir.empty()) return dir;
  auto builtin = model::EnsureBuiltinModel();
  if (!builtin.ok()) Fail(command, builtin.status());
  return *builtin;
}

void RunGateway(gateway::GatewayOptions o, const std::string& ready_file) {
  InitLogging("gateway", "info");
  o.model_dir = ModelOrBuiltin("gateway", o.model_dir);
  auto server = gateway::GatewayServer::Start(o);
  if (!server.ok()) Fail("gateway", server.status());
  if (!ready_file.empty()) {
    // Written whole then renamed, so a reader never sees half of it.
    const std::string tmp = ready_file + ".tmp";
    std::ofstream(tmp) << nlohmann::json{{"http_port", (*server)->http_port()},
                                         {"control_port", (*server)->control_port()},
                                         {"model", (*server)->model_id()}}
                              .dump();
    std::filesystem::rename(tmp, ready_file);
  }
  boost::asio::io_context signals_io;
  boost::asio::signal_set signals(signals_io, SIGINT, SIGTERM);
  signals.async_wait([&](auto, int) { (*server)->Stop(); });
  std::thread t([&] { signals_io.run(); });
  (*server)->Wait();
  signals_io.stop();
  t.join();
}

void RunWorker(decode_pool::WorkerOptions o) {
  InitLogging("worker", "info");
  o.model_dir = ModelOrBuiltin("decode", o.model_dir);
  auto worker = decode_pool::Worker::Create(o);
  if (!worker.ok()) Fail("decode", worker.status());
  boost::asio::io_context signals_io;
  boost::asio::signal_set signals(signals_io, SIGINT, SIGTERM);
  signals.async_wait([&](auto, int) { (*worker)->Drain(); });
  std::thread t([&] { signals_io.run(); });
  Status s = (*worker)->Run();
  signals_io.stop();
  t.join();
  if (!s.ok()) Fail("decode", s);
}

struct UpFlags {
  std::string model_dir;
  uint16_t port = 8000;
  int workers = 1;
  std::string ledger;
  bool no_auth = true;
};

pid_t Spawn(const std::vector<std::string>& args) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    std::perror("pdserve up: exec");
    ::_exit(127);
  }
  return pid;
}

void RunUp(const UpFlags& f) {
  const std::string model_dir = ModelOrBuiltin("up", f.model_dir);
  const std::string ready = std::filesystem::temp_directory_path() /
                            ("pdserve-up-" + std::to_string(::getpid()) + ".json");
  std::filesystem::remove(ready);
  // Children ignore nothing; we forward SIGINT/SIGTERM to them and wait.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  std::vector<pid_t> children;
  auto stop_all = [&](int code) {
    for (auto it = children.rbegin(); it != children.rend(); ++it) ::kill(*it, SIGTERM);
    for (pid_t c : children) ::waitpid(c, nullptr, 0);
    std::filesystem::remove(ready);
    if (code) throw CLI::RuntimeError(code);
  };
  sigset_t none;
  sigemptyset(&none);
  auto spawn = [&](std::vector<std::string> args) {
    sigprocmask(SIG_SETMASK, &none, nullptr);  // the child starts with signals unblocked
    pid_t pid = Spawn(args);
    sigprocmask(SIG_BLOCK, &mask, nullptr);
    children.push_back(pid);
  };
  spawn({"pdserve", "gateway", "--model", model_dir, "--port", std::to_string(f.port),
         "--ready-file", ready});
  nlohmann::json ports;
  for (int i = 0; i < 600 && ports.is_null(); ++i) {
    int status = 0;
    if (::waitpid(children[0], &status, WNOHANG) == children[0]) {
      children.clear();
      std::cerr << "pdserve up: the gateway exited during start-up\n";
      throw CLI::RuntimeError(1);
    }
    std::ifstream in(ready);
    if (in) ports = nlohmann::json::parse(in, nullptr, false);
    if (ports.is_discarded()) ports = nullptr;
    if (ports.is_null()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (ports.is_null()) {
    std::cerr << "pdserve up: the gateway did not start within 30 s\n";
    stop_all(1);
  }
  const std::string control = std::to_string(ports["control_port"].get<int>());
  for (int i = 0; i < f.workers; ++i) {
    spawn({"pdserve", "decode", "--role", "both", "--model", model_dir, "--gateway",
           "127.0.0.1:" + control});
  }
  const int http = ports["http_port"].get<int>();
  const std::string model = ports["model"].get<std::string>();
  std::cout
      << "pdserve is up: http://127.0.0.1:" << http << "/v1 serving '" << model << "' with "
      << f.workers << " colocated worker(s). Ctrl-C stops it.\n"
      << "  curl http://127.0.0.1:" << http
      << "/v1/chat/completions -H 'Content-Type: application/json' -d '{\"model\": \"" << model
      << "\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"max_tokens\": 16}'\n"
      << std::flush;
  // Wait for a signal or for any child to exit.
  while (true) {
    int status = 0;
    pid_t gone = ::waitpid(-1, &status, WNOHANG);
    if (gone > 0) {
      children.erase(std::remove(children.begin(), children.end(), gone), children.end());
      std::cerr << "pdserve up: a child process (" << gone << ") exited; stopping\n";
      stop_all(1);
    }
    timespec timeout{0, 200'000'000};
    if (sigtimedwait(&mask, nullptr, &timeout) > 0) break;
  }
  std::cout << "pdserve up: stopping\n";
  stop_all(0);
}

}  // namespace

void AddServeCommands(CLI::App& app) {
  auto g = std::make_shared<gateway::GatewayOptions>();
  auto ready = std::make_shared<std::string>();
  auto no_auth = std::make_shared<bool>(false);
  CLI::App* gw = app.add_subcommand("gateway", "The OpenAI-compatible front and worker registry");
  gw->add_option("--model", g->model_dir,
                 "Model directory (tokenizer, model id; default: built-in tiny)");
  gw->add_option("--served-model-name", g->model_id,
                 "Model id clients use (default: the directory name)");
  gw->add_option("--host", g->host, "Address to listen on");
  gw->add_option("--port", g->http_port, "HTTP port (0: any free port)");
  gw->add_option("--control-port", g->control_port, "Port workers dial (0: any free port)");
  gw->add_option("--cluster-token", g->cluster_token, "Workers must present this token");
  gw->add_option("--api-keys", g->api_keys_file, "API keys file (sha256:HEX tenant per line)");
  gw->add_flag("--no-auth", *no_auth,
               "Serve without API keys (the default when --api-keys is not given)");
  gw->add_option("--io-threads", g->io_threads, "Network threads")->check(CLI::Range(1, 64));
  gw->add_option("--ready-file", *ready, "Write the bound ports here as JSON once listening");
  gw->callback([g, ready, no_auth] {
    if (*no_auth) g->api_keys_file.clear();
    RunGateway(*g, *ready);
  });

  auto w = std::make_shared<decode_pool::WorkerOptions>();
  auto gateway_address = std::make_shared<std::string>();
  CLI::App* dec =
      app.add_subcommand("decode", "A worker that dials the gateway (use --role both: colocated)");
  dec->add_option("--model", w->model_dir, "Model directory (default: built-in tiny)");
  dec->add_option("--gateway", *gateway_address, "The gateway's control address host:port")
      ->required();
  dec->add_option("--role", w->role, "both (prefill and decode in this process)");
  dec->add_option("--capacity-class", w->capacity_class, "reserved or burst")
      ->check(CLI::IsMember({"reserved", "burst"}));
  dec->add_option("--price-per-gpu-hour", w->price_per_gpu_hour, "USD per GPU-hour");
  dec->add_option("--gpus", w->gpu_count, "GPUs this worker counts as");
  dec->add_option("--cluster-token", w->cluster_token, "Token the gateway expects");
  dec->add_option("--device", w->engine.device, "cpu");
  dec->add_option("--threads", w->engine.threads, "CPU threads (0: all)");
  dec->add_option("--kv-memory-mb", w->engine.kv_memory_mb, "KV pool size");
  dec->add_option("--max-running", w->engine.max_running, "Sequences decoding at once");
  dec->callback([w, gateway_address] {
    const auto colon = gateway_address->rfind(':');
    if (colon == std::string::npos) Fail("decode", InvalidArgument("--gateway must be host:port"));
    w->gateway_host = gateway_address->substr(0, colon);
    w->gateway_port = static_cast<uint16_t>(std::stoi(gateway_address->substr(colon + 1)));
    RunWorker(*w);
  });

  auto u = std::make_shared<UpFlags>();
  CLI::App* up =
      app.add_subcommand("up", "A gateway and colocated workers on localhost, in one command");
  up->add_option("--model", u->model_dir,
                 "Model directory (default: built-in tiny, made if absent)");
  up->add_option("--port", u->port, "HTTP port");
  up->add_option("--workers", u->workers, "Colocated workers (prefill and decode in one process)")
      ->check(CLI::Range(1, 64));
  up->callback([u] { RunUp(*u); });
}

}  // namespace pdserve::app
