// Ledger: the store that records what every request attempt cost (one AttemptRow per attempt)
// and when each worker was up (one WorkerPeriod per worker registration), so the report can set
// request costs against capacity, idle and retry waste (docs/architecture.md, "Cost model"). The
// gateway appends rows (through LedgerWriter, ledger/ledger_writer.h, off its request path);
// `pdserve report` and `pdserve ledger` read, export and forget them.
//
// Two stores with the same schema, the same rows and the same report: an embedded SQLite file
// (ledger/sqlite_ledger.h, the default) and a PostgreSQL database that several gateways share
// (ledger/postgres_ledger.h), chosen by the location: `postgresql://...` or `postgres://...` (a
// libpq connection URI) is PostgreSQL, anything else a file path.
//
// Threads: every method may be called from any thread; each store serialises its connection.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "ledger/attempt_cost.h"
#include "ledger/attempt_labels.h"
#include "ledger/cost_model.h"

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
  // The SQLite file (created with its folder's permissions if missing) or a PostgreSQL URI.
  std::string path;
  bool store_text = false;  // keep prompt and completion text (--ledger-store-text); off: ""
};

// Which rows Rows() returns. Times compare with a row's end_unix: from <= end < to.
struct LedgerFilter {
  std::optional<std::string> tenant;
  std::optional<double> from_unix, to_unix;
  std::map<std::string, std::string> tags;  // every one must match
};

// What AppendBatch committed: how many rows, and which it left out as already there (the
// same (request_id, attempt) in the store, or earlier in the batch), as "request_id#attempt".
struct AppendOutcome {
  int64_t written = 0;
  std::vector<std::string> duplicates;
};

class Ledger {
 public:
  // Opens or creates the ledger for writing: creates the schema (migrating an older one). A
  // clear error for a location that cannot be opened or a store that is not a pdserve ledger.
  static Result<std::unique_ptr<Ledger>> Open(const LedgerOptions& options);
  // For report and export: NotFound if the file or schema is missing; the same checks as Open.
  static Result<std::unique_ptr<Ledger>> OpenReadOnly(const std::string& location);
  // For changing a ledger that exists (ledger forget): like OpenReadOnly, but writable. An empty
  // file or database is refused, not made a ledger.
  static Result<std::unique_ptr<Ledger>> OpenExisting(const std::string& location);
  virtual ~Ledger() = default;

  // `rows` in one transaction, committed (durable against kill -9 of the caller) when it
  // returns. A row whose (request_id, attempt) is already there is left out and named in the
  // outcome; the others are written. On an error nothing of the batch is written.
  virtual Result<AppendOutcome> AppendBatch(const std::vector<AttemptRow>& rows) = 0;
  // One row, as AppendBatch; a second row with the same (request_id, attempt) is refused with
  // AlreadyExists.
  Status Append(const AttemptRow& row);
  // Inserts or updates each period by its period_id, in one transaction.
  virtual Status UpsertPeriods(const std::vector<WorkerPeriod>& periods) = 0;
  Status UpsertPeriod(const WorkerPeriod& period) { return UpsertPeriods({period}); }
  // Deletes the tenant's rows (and their tags and text); returns how many rows went.
  virtual Result<int64_t> ForgetTenant(const std::string& tenant) = 0;

  // Rows in (end_unix, request_id, attempt) order.
  virtual Result<std::vector<AttemptRow>> Rows(const LedgerFilter& filter) const = 0;
  // Periods that overlap [from, to) (all when unset), in (start_unix, period_id) order.
  virtual Result<std::vector<WorkerPeriod>> Periods(std::optional<double> from_unix,
                                                    std::optional<double> to_unix) const = 0;

  // Where it is, for messages: the file's path, or the URI without its password.
  virtual const std::string& path() const = 0;
};

// True for a PostgreSQL connection URI (postgresql:// or postgres://).
bool IsPostgresLocation(std::string_view location);

// A time on the command line: unix seconds ("1764410400", "1764410400.5") or ISO-8601 UTC
// ("2026-11-29T10:00:00Z", fractional seconds allowed).
Result<double> ParseTimeArg(std::string_view text);
// Unix seconds as ISO-8601 UTC with whole seconds ("2026-11-29T10:00:00Z").
std::string FormatUnixTime(double unix_seconds);

}  // namespace pdserve::ledger
