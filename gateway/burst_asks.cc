#include "gateway/burst_asks.h"

namespace pdserve::gateway {

void BurstAsks::Asked(planner::Pool pool, TimePoint when) {
  std::lock_guard lock(mu_);
  asks_[pool].push_back(when);
}

void BurstAsks::Withdrawn(planner::Pool pool) {
  std::lock_guard lock(mu_);
  auto& q = asks_[pool];
  if (!q.empty()) q.pop_back();
}

void BurstAsks::KeepAtMost(planner::Pool pool, int outstanding) {
  std::lock_guard lock(mu_);
  auto& q = asks_[pool];
  while (static_cast<int>(q.size()) > std::max(0, outstanding)) q.pop_front();
}

std::optional<BurstAsks::TimePoint> BurstAsks::Claim(const std::string& role,
                                                     const std::string& capacity_class) {
  if (capacity_class != "burst" || (role != "prefill" && role != "decode")) return std::nullopt;
  std::lock_guard lock(mu_);
  auto& q = asks_[role == "prefill" ? planner::Pool::kPrefill : planner::Pool::kDecode];
  if (q.empty()) return std::nullopt;
  const TimePoint t = q.front();
  q.pop_front();
  return t;
}

int BurstAsks::outstanding(planner::Pool pool) const {
  std::lock_guard lock(mu_);
  auto it = asks_.find(pool);
  return it == asks_.end() ? 0 : static_cast<int>(it->second.size());
}

}  // namespace pdserve::gateway
