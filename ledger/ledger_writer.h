// LedgerWriter: the gateway's way into the ledger (ledger/ledger.h), off its request path. A call
// queues its attempt's row into a bounded buffer and returns; one thread commits what the buffer
// holds as one batch (one transaction), so under load a batch carries every row that came during
// the previous commit (group commit) and at low load a row is committed about one commit after
// it came.
//
// Nothing accepted is dropped silently:
//   - a full buffer makes Append wait for room, which slows the gateway's calls (and so its
//     admission) to what the store sustains; each wait is counted (stats().full_waits);
//   - a batch that fails (the database down, a connection dropped) is kept and tried again every
//     retry_after, while the buffer fills behind it;
//   - a row the store refuses alone for what it holds (not for being unreachable) is logged
//     whole and counted (stats().rows_refused); a duplicate of a row already there is counted.
// What kill -9 of the gateway can lose is what the buffer holds then: the rows of the batch being
// committed and those queued behind it (stats().buffered; docs/architecture.md, "The ledger's
// writes"). Close() (the gateway's SIGTERM) commits them first.
//
// Threads: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ledger/ledger.h"

namespace pdserve::ledger {

struct LedgerWriterOptions {
  size_t capacity_rows = 10000;  // rows buffered before Append waits
  size_t batch_rows = 2000;      // most rows in one transaction
  std::chrono::milliseconds retry_after{200};
};

struct LedgerWriterStats {
  uint64_t rows_written = 0, duplicates = 0, rows_refused = 0;
  uint64_t batches = 0, failed_batches = 0;
  uint64_t full_waits = 0;       // Appends that waited for room
  double full_wait_seconds = 0;  // how long they waited, together
  size_t buffered = 0;           // rows not yet committed, the batch being written included
  size_t buffered_periods = 0;   // worker periods likewise
  size_t largest_batch = 0;
};

class LedgerWriter {
 public:
  LedgerWriter(std::shared_ptr<Ledger> ledger, LedgerWriterOptions options = {});
  ~LedgerWriter();  // Close(5 s)
  LedgerWriter(const LedgerWriter&) = delete;
  LedgerWriter& operator=(const LedgerWriter&) = delete;

  // Queues the row; waits while the buffer is full. After Close, writes it at once itself.
  void Append(AttemptRow row);
  // Queues the period's latest state; one queued before with its period_id is replaced.
  void UpsertPeriod(WorkerPeriod period);
  // Until everything queued before the call is committed (true) or `timeout` passed (false).
  bool Flush(std::chrono::milliseconds timeout);
  // Commits what is queued, trying for at most `drain` while the store fails, and stops the
  // thread; what it could not commit by then is logged as lost. Idempotent.
  void Close(std::chrono::milliseconds drain = std::chrono::seconds(5));

  LedgerWriterStats stats() const;
  const Ledger& ledger() const { return *ledger_; }

 private:
  void Run();
  // Writes `rows` (and `periods`): true once done with them, false to try again later.
  bool Write(const std::vector<AttemptRow>& rows, const std::vector<WorkerPeriod>& periods);
  void WriteAlone(const std::vector<AttemptRow>& rows);

  const std::shared_ptr<Ledger> ledger_;
  const LedgerWriterOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_;  // the thread: rows came, or closing
  std::condition_variable room_;  // Append and Flush: a batch was committed
  std::deque<AttemptRow> queue_;
  std::map<std::string, WorkerPeriod> periods_;
  size_t in_batch_ = 0, periods_in_batch_ = 0;  // what the thread is writing now
  uint64_t queued_total_ = 0, done_total_ = 0;  // rows ever queued; ever done with (in order)
  bool closing_ = false, closed_ = false;
  std::chrono::steady_clock::time_point drain_deadline_;
  LedgerWriterStats stats_;
  std::thread thread_;
};

}  // namespace pdserve::ledger
