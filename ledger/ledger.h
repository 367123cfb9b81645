// Ledger: the SQLite file that records what every request attempt cost (one AttemptRow per
// attempt) and when each worker was up (one WorkerPeriod per worker registration), so the report
// can set request costs against capacity, idle and retry waste (docs/architecture.md, "Cost
// model"). The gateway appends rows; `pdserve report` and `pdserve ledger` read, export and forget
// them.
//
// The file is SQLite in WAL mode with synchronous=NORMAL: a row is committed when Append
// returns, so it survives kill -9 of the gateway (not necessarily a power cut). Readers may open
// the file while the gateway writes. Schema version in `PRAGMA user_version`, the file's kind in
// `PRAGMA application_id`; a file of another kind or a newer version is refused.
//
// Schema versions: 2 stores each row's cost by part (AttemptCost: prefill and decode compute,
// egress, API tokens) beside its total, as the gateway priced it. A version 1 file is migrated
// when opened for writing: the part columns are added, empty (NULL) for its old rows. Rows read
// with no stored parts (old rows, or a version 1 file opened read-only) get them from what the
// row recorded: compute by the cost model from its step seconds and workers, egress as its
// egress_cost_usd, API tokens as the cost_usd of a class api row; their total() is its cost_usd.
// 3 adds each row's cached_prompt_tokens; a version 1 or 2 file is migrated to 3 when opened
// for writing (its old rows read 0), and read-only its rows read 0. 4 adds each row's placement
// and placement_reason, migrated the same way (old rows read ""). 5 adds admission's decision and
// its predicted queue wait and TTFT (old rows read "" and 0: not recorded).
//
// Threads: every method may be called from any thread; one mutex serialises the connection.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "ledger/attempt_cost.h"
#include "ledger/attempt_labels.h"
#include "ledger/cost_model.h"

struct sqlite3;

namespace pdserve::ledger {

struct AttemptRow {
  std::string request_id;  // OpenAI id (cmpl-.../chatcmpl-...), shared by a request's attempts
  int attempt = 1;
  std::string tenant, model, endpoint;  // endpoint: "completions" or "chat"
  AttemptStatus status = AttemptStatus::kOk;
  std::string finish_reason;  // "stop", "length", "abort", "" ...
  double arrival_unix = 0, first_token_unix = 0 /*0: none*/, end_unix = 0;
  double queue_seconds = 0, prefill_seconds = 0, transfer_seconds = 0, decode_seconds = 0;  // wall
  int64_t prompt_tokens = 0, completion_tokens = 0;
  // Of prompt_tokens, those whose KV the attempt's prefill (or colocated) worker, or its external
  // API, took from a prefix cache; never above prompt_tokens.
  int64_t cached_prompt_tokens = 0;
  // How the router placed it: "pair" (a prefill and a decode worker), "local" (its decode worker
  // prefilled it: conditional disaggregation), "colocated", "api" (an external API); and why, as
  // the router said (router/routers.h: "short_uncached", "local_faster", "pair_faster",
  // "always", "never", "round_robin"). "" where not recorded.
  std::string placement, placement_reason;
  // What admission decided for the request (every attempt's row carries it): "admitted" (started
  // on workers at once or after its wait in the queue), "overflowed" (sent to an external API:
  // cheaper at arrival, refused for its objective, or waited to its overflow time),
  // "waited_for_burst" (refused now, it waited for a burst worker due within its objective),
  // "refused" (429 for its objective) or "queue_timeout" (503: no worker took it in time); ""
  // where not recorded.
  std::string admission;
  // What admission predicted when the request's first attempt was submitted, on each of its
  // attempts' rows (0: none predicted, as before any prompt rate was measured): the wait before
  // its prompt starts and its time to first token, both from its arrival. The outcomes to set
  // them against are its final row's queue_seconds and first_token_unix - arrival_unix.
  double predicted_queue_seconds = 0, predicted_ttft_seconds = 0;
  WorkerRef prefill_worker, decode_worker;  // the same worker twice when colocated; id 0 = none
  double prefill_step_seconds = 0, decode_step_seconds = 0;  // attributed step wall (not x gpus)
  int64_t kv_bytes = 0;
  // PriceAttempt's, once; stored as the columns egress_cost_usd (its egress_usd), cost_usd (its
  // total()) and the other parts' own.
  AttemptCost cost;
  std::map<std::string, std::string> tags;   // from x-pdserve-tags: env=prod,job=nightly
  std::string user;                          // OpenAI `user` field
  std::string prompt_text, completion_text;  // stored only when LedgerOptions::store_text
};

struct WorkerPeriod {     // one worker process's registration with one gateway run
  std::string period_id;  // unique key, e.g. "<gateway start unix ns>-<worker id>"
  WorkerRef worker;
  double start_unix = 0, end_unix = 0;  // end = last seen while it runs
  double busy_seconds = 0;              // its engine step time charged to attempts
};

struct LedgerOptions {
  std::string path;         // the SQLite file; created with its folder's permissions if missing
  bool store_text = false;  // keep prompt and completion text (--ledger-store-text); off: ""
};

// Which rows Rows() returns. Times compare with a row's end_unix: from <= end < to.
struct LedgerFilter {
  std::optional<std::string> tenant;
  std::optional<double> from_unix, to_unix;
  std::map<std::string, std::string> tags;  // every one must match
};

class Ledger {
 public:
  // Opens or creates the ledger for writing: creates the schema, WAL mode. A clear error for a
  // path that cannot be opened or a file that is not a pdserve ledger.
  static Result<std::unique_ptr<Ledger>> Open(const LedgerOptions& options);
  // For report and export: NotFound if the file is missing; the same checks as Open.
  static Result<std::unique_ptr<Ledger>> OpenReadOnly(const std::string& path);
  // For changing a ledger that exists (ledger forget): like OpenReadOnly, but writable. An empty
  // file or database is refused, not made a ledger.
  static Result<std::unique_ptr<Ledger>> OpenExisting(const std::string& path);
  ~Ledger();
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  // Committed (durable against kill -9) when it returns. A second row with the same
  // (request_id, attempt) is refused with AlreadyExists.
  Status Append(const AttemptRow& row);
  // Inserts or updates the period with this period_id.
  Status UpsertPeriod(const WorkerPeriod& period);
  // Deletes the tenant's rows (and their tags and text); returns how many rows went.
  Result<int64_t> ForgetTenant(const std::string& tenant);

  // Rows in (end_unix, request_id, attempt) order.
  Result<std::vector<AttemptRow>> Rows(const LedgerFilter& filter) const;
  // Periods that overlap [from, to) (all when unset), in (start_unix, period_id) order.
  Result<std::vector<WorkerPeriod>> Periods(std::optional<double> from_unix,
                                            std::optional<double> to_unix) const;

  const std::string& path() const { return path_; }

 private:
  Ledger(sqlite3* db, std::string path, bool store_text);
  static Result<std::unique_ptr<Ledger>> OpenWith(const std::string& path, int flags,
                                                  bool store_text);
  Status CheckOrCreateSchema(int flags);  // the SQLITE_OPEN_* flags the file was opened with
  // Brings an older file to kSchemaVersion in one transaction, each version's step in turn.
  Status Migrate();
  Status Exec(const char* sql) const;

  mutable std::mutex mu_;
  sqlite3* db_;  // guarded by mu_
  const std::string path_;
  const bool store_text_;
  int schema_version_ = 0;  // the file's, once checked (a read-only file may be older)
};

// A time on the command line: unix seconds ("1764410400", "1764410400.5") or ISO-8601 UTC
// ("2026-11-29T10:00:00Z", fractional seconds allowed).
Result<double> ParseTimeArg(std::string_view text);
// Unix seconds as ISO-8601 UTC with whole seconds ("2026-11-29T10:00:00Z").
std::string FormatUnixTime(double unix_seconds);

}  // namespace pdserve::ledger
