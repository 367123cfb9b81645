// FakeLedger: a Ledger (ledger/ledger.h) in memory, for the tests of its writers: it records each
// batch, can hold a batch until released (to fill a writer's buffer), and can fail batches
// (Unavailable, as a store that is down) or refuse a row by id (InvalidArgument). Tests only.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ledger/ledger.h"

namespace pdserve::testing {

class FakeLedger : public ledger::Ledger {
 public:
  Result<ledger::AppendOutcome> AppendBatch(const std::vector<ledger::AttemptRow>& rows) override {
    std::unique_lock lock(mu_);
    ++calls_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return !hold_; });
    if (down_) return Unavailable("fake ledger: down");
    for (const auto& r : rows) {
      if (refuse_.count(r.request_id))
        return InvalidArgument("fake ledger: refused " + r.request_id);
    }
    ledger::AppendOutcome outcome;
    for (const auto& r : rows) {
      if (!keys_.insert({r.request_id, r.attempt}).second) {
        outcome.duplicates.push_back(r.request_id + "#" + std::to_string(r.attempt));
        continue;
      }
      rows_.push_back(r);
      ++outcome.written;
    }
    batch_sizes_.push_back(rows.size());
    return outcome;
  }
  Status UpsertPeriods(const std::vector<ledger::WorkerPeriod>& periods) override {
    std::lock_guard lock(mu_);
    if (down_) return Unavailable("fake ledger: down");
    for (const auto& p : periods) periods_[p.period_id] = p;
    return Status::Ok();
  }
  Result<int64_t> ForgetTenant(const std::string&) override { return 0; }
  Result<std::vector<ledger::AttemptRow>> Rows(const ledger::LedgerFilter&) const override {
    std::lock_guard lock(mu_);
    return rows_;
  }
  Result<std::vector<ledger::WorkerPeriod>> Periods(std::optional<double>,
                                                    std::optional<double>) const override {
    std::lock_guard lock(mu_);
    std::vector<ledger::WorkerPeriod> out;
    for (const auto& [id, p] : periods_) out.push_back(p);
    return out;
  }
  const std::string& path() const override { return path_; }

  // While held, AppendBatch waits (after counting its call) until Release.
  void Hold() {
    std::lock_guard lock(mu_);
    hold_ = true;
  }
  void Release() {
    std::lock_guard lock(mu_);
    hold_ = false;
    changed_.notify_all();
  }
  // Until AppendBatch has been called `n` times in all.
  void WaitForCalls(int n) {
    std::unique_lock lock(mu_);
    changed_.wait(lock, [&] { return calls_ >= n; });
  }
  void SetDown(bool down) {
    std::lock_guard lock(mu_);
    down_ = down;
  }
  void Refuse(const std::string& request_id) {
    std::lock_guard lock(mu_);
    refuse_.insert(request_id);
  }
  std::vector<size_t> batch_sizes() const {
    std::lock_guard lock(mu_);
    return batch_sizes_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool hold_ = false, down_ = false;
  int calls_ = 0;
  std::set<std::string> refuse_;
  std::set<std::pair<std::string, int>> keys_;
  std::vector<ledger::AttemptRow> rows_;
  std::vector<size_t> batch_sizes_;
  std::map<std::string, ledger::WorkerPeriod> periods_;
  std::string path_ = "fake";
};

}  // namespace pdserve::testing
