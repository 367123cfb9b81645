// `pdserve bench ledger`: how many attempt rows a second the cost ledger commits, from one and
// from several threads at once, so the figure can be set against the request rate a gateway
// serves: one transaction a row (Ledger::Append: the baseline), and batched as the gateway writes
// them (LedgerWriter: each commit takes every row queued during the last). On an SQLite file (a
// fresh one per run) or a PostgreSQL database (--ledger postgresql://...: each run's rows under
// a tenant of its own, forgotten after it). --min-batched-rate fails the run (exit 1) when the
// batched median of a thread count falls below it.
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
#include "ledger/ledger_writer.h"

namespace pdserve::app {
namespace {

struct BenchLedgerOptions {
  int rows = 20000;
  int repeats = 3;
  std::vector<int> threads{1, 2};
  std::string dir;     // default: a temporary folder
  std::string ledger;  // a PostgreSQL URI instead of a file in `dir`
  size_t batch_rows = ledger::LedgerWriterOptions().batch_rows;
  double min_batched_rate = 0;  // rows/s; 0: no threshold
  int per_row_rows = 0;         // rows a per-row run (0: --rows)
};

ledger::AttemptRow SampleRow(const std::string& tenant, int thread, int i) {
  ledger::AttemptRow row;
  row.request_id = "cmpl-" + tenant + "-" + std::to_string(thread) + "-" + std::to_string(i);
  row.tenant = tenant;
  row.tags = {{"job", "bench"}};
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

// A ledger for one run, and the tenant its rows go under.
struct RunLedger {
  std::shared_ptr<ledger::Ledger> ledger;
  std::string tenant;
};

Result<RunLedger> OpenRunLedger(const BenchLedgerOptions& o, const std::filesystem::path& dir,
                                int run) {
  RunLedger r;
  r.tenant = "bench" + std::to_string(::getpid()) + "r" + std::to_string(run);
  if (!o.ledger.empty()) {
    PDSERVE_ASSIGN_OR_RETURN(r.ledger, ledger::Ledger::Open({o.ledger}));
    return r;
  }
  const std::filesystem::path path = dir / "ledger.sqlite";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
  PDSERVE_ASSIGN_OR_RETURN(r.ledger, ledger::Ledger::Open({path.string()}));
  return r;
}

// Rows a second over `rows` rows from `threads` threads: each Append its own transaction, or
// (batched) queued into a LedgerWriter, timed until it has committed them all.
Result<double> AppendRate(const BenchLedgerOptions& o, const RunLedger& run, int threads,
                          bool batched) {
  const int rows = batched || o.per_row_rows == 0 ? o.rows : o.per_row_rows;
  std::vector<std::vector<ledger::AttemptRow>> work(threads);
  for (int i = 0; i < rows; ++i) work[i % threads].push_back(SampleRow(run.tenant, i % threads, i));
  std::vector<Status> errors(threads);
  std::unique_ptr<ledger::LedgerWriter> writer;
  if (batched) {
    ledger::LedgerWriterOptions options;
    options.batch_rows = o.batch_rows;
    writer = std::make_unique<ledger::LedgerWriter>(run.ledger, options);
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (auto& row : work[t]) {
        if (writer) {
          writer->Append(std::move(row));
        } else if (Status s = run.ledger->Append(row); !s.ok()) {
          errors[t] = s;
          return;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  if (writer && !writer->Flush(std::chrono::minutes(10))) {
    return DeadlineExceeded("bench ledger: the writer did not commit its rows in 10 minutes");
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const Status& s : errors) PDSERVE_RETURN_IF_ERROR(s);
  if (writer) {
    const ledger::LedgerWriterStats stats = writer->stats();
    if (stats.rows_written != static_cast<uint64_t>(rows)) {
      return Internal("bench ledger: " + std::to_string(stats.rows_written) + " rows written of " +
                      std::to_string(rows));
    }
  }
  return rows / seconds;
}

Status RunBenchLedger(const BenchLedgerOptions& o) {
  namespace fs = std::filesystem;
  fs::path dir = o.dir.empty() ? fs::temp_directory_path() /
                                     ("pdserve-bench-ledger-" + std::to_string(::getpid()))
                               : fs::path(o.dir);
  if (o.ledger.empty()) fs::create_directories(dir);
  std::printf(
      "bench ledger: %d rows a run in %s; per row: one transaction each "
      "(Ledger::Append); batched: LedgerWriter, at most %zu rows a transaction\n",
      o.rows, o.ledger.empty() ? dir.c_str() : o.ledger.c_str(), o.batch_rows);
  std::printf("threads  rows/s median  [min, max] of %d runs\n", o.repeats);
  Status status;
  std::vector<std::string> below;
  int run = 0;
  for (bool batched : {false, true}) {
    for (int threads : o.threads) {
      std::vector<double> rates;
      for (int r = 0; r < o.repeats && status.ok(); ++r) {
        auto ledger = OpenRunLedger(o, dir, run++);
        if (!ledger.ok()) {
          status = ledger.status();
          break;
        }
        auto rate = AppendRate(o, *ledger, threads, batched);
        if (!o.ledger.empty()) (void)ledger->ledger->ForgetTenant(ledger->tenant);
        if (rate.ok()) {
          rates.push_back(*rate);
        } else {
          status = rate.status();
        }
      }
      if (!status.ok()) break;
      std::sort(rates.begin(), rates.end());
      const double median = rates[rates.size() / 2];
      // Per-row lines start with the thread count (scripts/gateway-overhead reads them).
      std::printf("%s%7d  %13.0f  [%.0f, %.0f]\n", batched ? "batched " : "", threads, median,
                  rates.front(), rates.back());
      if (batched && median < o.min_batched_rate) {
        below.push_back(std::to_string(threads) +
                        " thread(s): " + std::to_string(static_cast<int64_t>(median)) + " rows/s");
      }
    }
  }
  if (o.dir.empty() && o.ledger.empty()) fs::remove_all(dir);
  PDSERVE_RETURN_IF_ERROR(status);
  if (!below.empty()) {
    std::string text;
    for (const auto& b : below) text += (text.empty() ? "" : ", ") + b;
    return FailedPrecondition("batched rate below --min-batched-rate " +
                              std::to_string(static_cast<int64_t>(o.min_batched_rate)) +
                              " rows/s: " + text);
  }
  return Status::Ok();
}

}  // namespace

void AddBenchLedgerCommand(CLI::App& bench) {
  auto o = std::make_shared<BenchLedgerOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "ledger", "Cost ledger: attempt rows committed a second, one a transaction and batched");
  cmd->add_option("--rows", o->rows, "Rows a run")->check(CLI::Range(1, 10'000'000));
  cmd->add_option("--repeats", o->repeats, "Runs per thread count (median reported)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--threads", o->threads, "Thread counts to try")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  cmd->add_option("--dir", o->dir, "Folder for the ledger file (default: a temporary one)");
  cmd->add_option("--ledger", o->ledger,
                  "A PostgreSQL ledger (postgresql://...) instead of a file; each run's rows are "
                  "forgotten after it")
      ->check([](const std::string& v) {
        return ledger::IsPostgresLocation(v) ? std::string() : "not a postgresql:// URI";
      });
  cmd->add_option("--per-row-rows", o->per_row_rows,
                  "Rows a per-row run, where that baseline is slow (default: --rows)")
      ->check(CLI::Range(1, 10'000'000));
  cmd->add_option("--batch-rows", o->batch_rows, "Most rows in one batched transaction")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--min-batched-rate", o->min_batched_rate,
                  "Fail (exit 1) when a thread count's batched median is below this many rows/s");
  cmd->callback([o] { ExitOnError("bench ledger", RunBenchLedger(*o)); });
}

}  // namespace pdserve::app
