// The ledger's batching writer; see ledger_writer.h.
#include "ledger/ledger_writer.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace pdserve::ledger {

LedgerWriter::LedgerWriter(std::shared_ptr<Ledger> ledger, LedgerWriterOptions options)
    : ledger_(std::move(ledger)), options_(options) {
  thread_ = std::thread([this] { Run(); });
}

LedgerWriter::~LedgerWriter() { Close(); }

void LedgerWriter::Append(AttemptRow row) {
  std::unique_lock lock(mu_);
  if (!closed_ && queue_.size() + in_batch_ >= options_.capacity_rows) {
    ++stats_.full_waits;
    const auto start = std::chrono::steady_clock::now();
    room_.wait(lock, [&] { return closed_ || queue_.size() + in_batch_ < options_.capacity_rows; });
    stats_.full_wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (closed_) {  // after Close: at once, on the caller's thread
    lock.unlock();
    if (Status s = ledger_->Append(row); !s.ok()) {
      spdlog::error("ledger: could not record {} attempt {} after closing: {}", row.request_id,
                    row.attempt, s.ToString());
    }
    return;
  }
  queue_.push_back(std::move(row));
  ++queued_total_;
  wake_.notify_one();
}

void LedgerWriter::UpsertPeriod(WorkerPeriod period) {
  std::unique_lock lock(mu_);
  if (closed_) {
    lock.unlock();
    if (Status s = ledger_->UpsertPeriod(period); !s.ok()) {
      spdlog::error("ledger: could not record period {}: {}", period.period_id, s.ToString());
    }
    return;
  }
  periods_[period.period_id] = std::move(period);
  wake_.notify_one();
}

bool LedgerWriter::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  const uint64_t target = queued_total_;
  return room_.wait_for(lock, timeout, [&] {
    return closed_ ||
           (done_total_ >= target && periods_.empty() && in_batch_ == 0 && periods_in_batch_ == 0);
  });
}

void LedgerWriter::Close(std::chrono::milliseconds drain) {
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      closing_ = true;
      drain_deadline_ = std::chrono::steady_clock::now() + drain;
    }
    wake_.notify_all();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

LedgerWriterStats LedgerWriter::stats() const {
  std::lock_guard lock(mu_);
  LedgerWriterStats s = stats_;
  s.buffered = queue_.size() + in_batch_;
  s.buffered_periods = periods_.size() + periods_in_batch_;
  return s;
}

void LedgerWriter::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return closing_ || !queue_.empty() || !periods_.empty(); });
    if (queue_.empty() && periods_.empty()) break;  // closing, and nothing left
    std::vector<AttemptRow> rows;
    const size_t n = std::min(queue_.size(), options_.batch_rows);
    rows.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      rows.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    std::vector<WorkerPeriod> periods;
    for (auto& [id, period] : periods_) periods.push_back(std::move(period));
    periods_.clear();
    in_batch_ = rows.size();
    periods_in_batch_ = periods.size();
    lock.unlock();
    const bool done = Write(rows, periods);
    lock.lock();
    in_batch_ = periods_in_batch_ = 0;
    if (done) {
      done_total_ += rows.size();
      ++stats_.batches;
      stats_.largest_batch = std::max(stats_.largest_batch, rows.size());
      room_.notify_all();
      continue;
    }
    // Kept, in order, ahead of what came since; a period's newer state wins.
    for (auto it = rows.rbegin(); it != rows.rend(); ++it) queue_.push_front(std::move(*it));
    for (auto& period : periods) periods_.try_emplace(period.period_id, std::move(period));
    ++stats_.failed_batches;
    if (closing_ && std::chrono::steady_clock::now() >= drain_deadline_) {
      spdlog::error(
          "ledger {}: closing with {} row(s) and {} period(s) not recorded: the store "
          "kept failing",
          ledger_->path(), queue_.size(), periods_.size());
      done_total_ += queue_.size();
      queue_.clear();
      periods_.clear();
      break;
    }
    room_.wait_for(lock, options_.retry_after);  // the lock is free for Append meanwhile
  }
  closed_ = true;
  room_.notify_all();
}

bool LedgerWriter::Write(const std::vector<AttemptRow>& rows,
                         const std::vector<WorkerPeriod>& periods) {
  uint64_t failures = 0;
  {
    std::lock_guard lock(mu_);
    failures = stats_.failed_batches;
  }
  const auto failed = [&](const Status& s) {
    // The first failure of a run of them, then one in 50 (every 10 s at the default retry).
    if (failures % 50 == 0) {
      spdlog::error(
          "ledger: could not commit {} row(s) and {} period(s), keeping them and "
          "trying again every {} ms: {}",
          rows.size(), periods.size(), options_.retry_after.count(), s.ToString());
    }
    return false;
  };
  if (!periods.empty()) {
    if (Status s = ledger_->UpsertPeriods(periods); !s.ok()) return failed(s);
  }
  if (rows.empty()) return true;
  auto outcome = ledger_->AppendBatch(rows);
  if (!outcome.ok()) {
    if (outcome.status().code() == StatusCode::kUnavailable) return failed(outcome.status());
    WriteAlone(rows);  // something in the batch was refused: find which
    return true;
  }
  std::lock_guard lock(mu_);
  stats_.rows_written += outcome->written;
  stats_.duplicates += outcome->duplicates.size();
  for (const std::string& id : outcome->duplicates) {
    spdlog::warn("ledger: row {} is already recorded; not written twice", id);
  }
  return true;
}

void LedgerWriter::WriteAlone(const std::vector<AttemptRow>& rows) {
  for (const AttemptRow& row : rows) {
    Status s = ledger_->Append(row);
    std::lock_guard lock(mu_);
    if (s.ok()) {
      ++stats_.rows_written;
    } else if (s.code() == StatusCode::kAlreadyExists) {
      ++stats_.duplicates;
    } else {
      ++stats_.rows_refused;
      spdlog::error(
          "ledger: the store refused row {}#{} (tenant {}, model {}, {} + {} tokens, "
          "${:.6f}): {}",
          row.request_id, row.attempt, row.tenant, row.model, row.prompt_tokens,
          row.completion_tokens, row.cost.total(), s.ToString());
    }
  }
}

}  // namespace pdserve::ledger
