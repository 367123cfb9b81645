// `pdserve bench ledger`: how many attempt rows a second the cost ledger commits, one transaction
// per row as the gateway writes them (Ledger::Append), from one and from several threads at
// once, so the figure can be set against the request rate a gateway serves.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "app/commands.h"
#include "ledger/ledger.h"

namespace pdserve::app {
namespace {

struct BenchLedgerOptions {
  int rows = 20000;
  int repeats = 3;
  std::vector<int> threads{1, 2};
  std::string dir;  // default: a temporary folder
};

ledger::AttemptRow SampleRow(int thread, int i) {
  ledger::AttemptRow row;
  row.request_id = "cmpl-bench-" + std::to_string(thread) + "-" + std::to_string(i);
  row.tenant = "bench";
  row.model = "tiny";
  row.endpoint = "completions";
  row.status = ledger::AttemptStatus::kOk;
  row.finish_reason = "length";
  row.arrival_unix = 1.7e9 + i;
  row.first_token_unix = row.arrival_unix + 0.01;
  row.end_unix = row.arrival_unix + 0.2;
  row.prompt_tokens = 128;
  row.completion_tokens = 64;
  row.prefill_worker = {1, "host:1:prefill", "prefill", CapacityClass::kReserved, "", 2.0, 1};
  row.decode_worker = {2, "host:2:decode", "decode", CapacityClass::kReserved, "", 2.0, 1};
  row.prefill_step_seconds = 0.01;
  row.decode_step_seconds = 0.05;
  row.cost = ledger::PriceAttempt(row, {});
  return row;
}

// Rows a second over `rows` appends split across `threads` threads, on a new ledger file.
Result<double> AppendRate(const std::filesystem::path& path, int rows, int threads) {
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + "-wal");
  std::filesystem::remove(path.string() + "-shm");
  PDSERVE_ASSIGN_OR_RETURN(auto ledger, ledger::Ledger::Open({path.string()}));
  std::vector<std::vector<ledger::AttemptRow>> work(threads);
  for (int i = 0; i < rows; ++i) work[i % threads].push_back(SampleRow(i % threads, i));
  std::vector<Status> errors(threads);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (const auto& row : work[t]) {
        if (Status s = ledger->Append(row); !s.ok()) {
          errors[t] = s;
          return;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const Status& s : errors) PDSERVE_RETURN_IF_ERROR(s);
  return rows / seconds;
}

Status RunBenchLedger(const BenchLedgerOptions& o) {
  namespace fs = std::filesystem;
  fs::path dir = o.dir.empty() ? fs::temp_directory_path() /
                                     ("pdserve-bench-ledger-" + std::to_string(::getpid()))
                               : fs::path(o.dir);
  fs::create_directories(dir);
  std::printf("bench ledger: %d rows a run, one transaction each (Ledger::Append), in %s\n", o.rows,
              dir.c_str());
  std::printf("threads  rows/s median  [min, max] of %d runs\n", o.repeats);
  Status status;
  for (int threads : o.threads) {
    std::vector<double> rates;
    for (int r = 0; r < o.repeats && status.ok(); ++r) {
      auto rate = AppendRate(dir / "ledger.sqlite", o.rows, threads);
      if (rate.ok())
        rates.push_back(*rate);
      else
        status = rate.status();
    }
    if (!status.ok()) break;
    std::sort(rates.begin(), rates.end());
    std::printf("%7d  %13.0f  [%.0f, %.0f]\n", threads, rates[rates.size() / 2], rates.front(),
                rates.back());
  }
  if (o.dir.empty()) fs::remove_all(dir);
  return status;
}

}  // namespace

void AddBenchLedgerCommand(CLI::App& bench) {
  auto o = std::make_shared<BenchLedgerOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "ledger", "Cost ledger: attempt rows committed a second, one transaction each");
  cmd->add_option("--rows", o->rows, "Rows a run")->check(CLI::Range(1, 10'000'000));
  cmd->add_option("--repeats", o->repeats, "Runs per thread count (median reported)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--threads", o->threads, "Thread counts to try")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  cmd->add_option("--dir", o->dir, "Folder for the ledger file (default: a temporary one)");
  cmd->callback([o] { ExitOnError("bench ledger", RunBenchLedger(*o)); });
}

}  // namespace pdserve::app
