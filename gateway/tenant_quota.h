// TenantQuota: per-tenant rate limits checked at admission, before a request reaches a worker.
// Each tenant may have a requests-per-minute and a tokens-per-minute limit; a request costs one
// request and its prompt tokens plus its max_tokens (what it may use, counted when admitted: the
// output is not known yet, and a request that stops early is not refunded).
//
// Algorithm: one token bucket per tenant and limit. A bucket holds at most one minute's limit,
// starts full and refills continuously at limit/60 per second, so a tenant may burst up to its
// whole minute at once and then goes at the steady rate. A request is admitted only when both
// buckets hold enough; a refused request takes nothing. A refusal says which limit and how long
// until the request would fit (Retry-After, whole seconds, at least 1). A request larger than a
// whole minute's token limit can never fit: it is refused with the minute as its wait.
//
// Shared across gateways (a `lease`, as ledger/postgres_budgets.h gives): the buckets above live in
// a store all gateways draw from, and each gateway's own buckets hold only what it leased and has
// not spent. A bucket short of a request takes what it lacks, or 100 ms of the limit if more,
// from the shared one; so N gateways allow the limit once, plus at most 100 ms of it each. While
// the store fails, each gateway's buckets refill by time on their own (the limit per gateway).
//
// Thread-safety: Admit may be called from any thread (one mutex guards the buckets; a lease is
// taken under it). The clock is injectable for tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"

namespace pdserve::gateway {

struct TenantLimits {
  int64_t requests_per_minute = 0;  // 0: no limit
  int64_t tokens_per_minute = 0;    // 0: no limit; prompt + max_tokens per request
  bool unlimited() const { return requests_per_minute <= 0 && tokens_per_minute <= 0; }
  bool operator==(const TenantLimits&) const = default;
};

struct QuotaDecision {
  bool admitted = true;
  // When refused: which limit ("requests" or "tokens", OpenAI's error type for each), the
  // seconds until the request would fit, and a message naming the tenant and the limit.
  std::string limit;
  int retry_after_s = 0;
  std::string message;
};

class TenantQuota {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // Takes up to `want` of `tenant`'s shared bucket of `kind` ("requests" or "tokens") whose limit
  // is `per_minute`; how much it took.
  using Lease = std::function<Result<double>(const std::string& tenant, const std::string& kind,
                                             double per_minute, double want)>;

  // `limits`: per tenant; a tenant not listed gets `default_limits`. `lease`: the shared
  // buckets; null: this gateway's own.
  explicit TenantQuota(std::map<std::string, TenantLimits> limits, TenantLimits default_limits = {},
                       Clock clock = &std::chrono::steady_clock::now, Lease lease = nullptr);

  // Admits (and charges) a request of `tokens` tokens for `tenant`, or says why not.
  QuotaDecision Admit(const std::string& tenant, int64_t tokens);
  // Gives back what an admitted request of `tokens` was charged: it never ran (refused by the
  // admission queue, timed out in it, or withdrawn). The buckets stay at most full.
  void Refund(const std::string& tenant, int64_t tokens);

  TenantLimits LimitsFor(const std::string& tenant) const;

 private:
  struct Bucket {
    double level = 0;  // what is left now; the capacity is the per-minute limit
    std::chrono::steady_clock::time_point updated;
  };
  struct Buckets {
    Bucket requests, tokens;
  };

  // Shared: tops `b`'s short buckets up from the shared ones for a request of `tokens`. False
  // when the store failed. Under mu_.
  bool LeaseLocked(const std::string& tenant, const TenantLimits& limits, int64_t tokens,
                   Buckets& b);

  const std::map<std::string, TenantLimits> limits_;
  const TenantLimits default_limits_;
  const Clock clock_;
  const Lease lease_;
  bool lease_failing_ = false;  // guarded by mu_: logs the store's failure once a run

  std::mutex mu_;
  std::map<std::string, Buckets> buckets_;  // by tenant; guarded by mu_
};

}  // namespace pdserve::gateway
