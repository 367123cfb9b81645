#include "gateway/tenant_quota.h"

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

namespace pdserve::gateway {

namespace {

// Brings a bucket of `capacity` per minute up to `now`; a new bucket starts full.
void Refill(double capacity, std::chrono::steady_clock::time_point now, bool fresh, double* level,
            std::chrono::steady_clock::time_point* updated) {
  if (fresh) {
    *level = capacity;
  } else {
    const double elapsed = std::chrono::duration<double>(now - *updated).count();
    if (elapsed > 0) *level = std::min(capacity, *level + elapsed * capacity / 60.0);
  }
  *updated = now;
}

// Whole seconds until a bucket of `capacity` per minute at `level` holds `need`, at least 1.
int SecondsUntil(double capacity, double level, double need) {
  const double seconds = (need - level) * 60.0 / capacity;
  return std::max(1, static_cast<int>(std::ceil(seconds - 1e-9)));
}

std::string Refusal(const std::string& tenant, const char* what, const char* abbrev, int64_t limit,
                    double level, int64_t requested, int retry_after_s) {
  const auto used = static_cast<int64_t>(std::llround(static_cast<double>(limit) - level));
  return "Rate limit reached for tenant '" + tenant + "' on " + what + " per min (" + abbrev +
         "): Limit " + std::to_string(limit) + ", Used " + std::to_string(used) + ", Requested " +
         std::to_string(requested) + ". Please try again in " + std::to_string(retry_after_s) +
         "s.";
}

}  // namespace

TenantQuota::TenantQuota(std::map<std::string, TenantLimits> limits, TenantLimits default_limits,
                         Clock clock, Lease lease)
    : limits_(std::move(limits)),
      default_limits_(default_limits),
      clock_(std::move(clock)),
      lease_(std::move(lease)) {}

bool TenantQuota::LeaseLocked(const std::string& tenant, const TenantLimits& limits, int64_t tokens,
                              Buckets& b) {
  const auto top_up = [&](const char* kind, int64_t limit, double need, Bucket& bucket) {
    const auto per_minute = static_cast<double>(limit);
    if (limit <= 0 || bucket.level >= need) return true;
    const double want = std::max(need - bucket.level, per_minute / 600.0);  // 100 ms of it
    auto got = lease_(tenant, kind, per_minute, want);
    if (!got.ok()) {
      if (!lease_failing_) {
        spdlog::warn(
            "tenant limits: the shared budgets fail ({}); each gateway limits alone "
            "until they answer",
            got.status().ToString());
      }
      lease_failing_ = true;
      return false;
    }
    if (lease_failing_) spdlog::info("tenant limits: the shared budgets answer again");
    lease_failing_ = false;
    bucket.level += *got;
    return true;
  };
  return top_up("requests", limits.requests_per_minute, 1.0, b.requests) &&
         top_up("tokens", limits.tokens_per_minute, static_cast<double>(tokens), b.tokens);
}

TenantLimits TenantQuota::LimitsFor(const std::string& tenant) const {
  auto it = limits_.find(tenant);
  return it == limits_.end() ? default_limits_ : it->second;
}

QuotaDecision TenantQuota::Admit(const std::string& tenant, int64_t tokens) {
  const TenantLimits limits = LimitsFor(tenant);
  if (limits.unlimited()) return {};
  tokens = std::max<int64_t>(tokens, 0);
  const bool limit_requests = limits.requests_per_minute > 0;
  const bool limit_tokens = limits.tokens_per_minute > 0;
  const auto rpm = static_cast<double>(limits.requests_per_minute);
  const auto tpm = static_cast<double>(limits.tokens_per_minute);

  QuotaDecision refused;
  refused.admitted = false;
  if (limit_tokens && tokens > limits.tokens_per_minute) {
    refused.limit = "tokens";
    refused.retry_after_s = 60;
    refused.message =
        "Request too large for tenant '" + tenant + "' on tokens per min (TPM): Limit " +
        std::to_string(limits.tokens_per_minute) + ", Requested " + std::to_string(tokens) +
        " (prompt + max_tokens). Lower max_tokens or shorten the prompt.";
    return refused;
  }

  const auto now = clock_();
  std::lock_guard lock(mu_);
  auto [it, fresh] = buckets_.try_emplace(tenant);
  Buckets& b = it->second;
  if (lease_ && LeaseLocked(tenant, limits, tokens, b)) {
    b.requests.updated = b.tokens.updated = now;  // from here a failing store refills by time
  } else {
    // A shared bucket that is new here starts empty: its budget is the store's.
    const bool full = fresh && !lease_;
    if (limit_requests) Refill(rpm, now, full, &b.requests.level, &b.requests.updated);
    if (limit_tokens) Refill(tpm, now, full, &b.tokens.level, &b.tokens.updated);
  }

  const bool requests_short = limit_requests && b.requests.level < 1.0;
  const bool tokens_short = limit_tokens && b.tokens.level < static_cast<double>(tokens);
  if (!requests_short && !tokens_short) {
    if (limit_requests) b.requests.level -= 1.0;
    if (limit_tokens) b.tokens.level -= static_cast<double>(tokens);
    return {};
  }
  // Name the limit that keeps the request waiting longest; wait until both would fit.
  const int wait_requests = requests_short ? SecondsUntil(rpm, b.requests.level, 1.0) : 0;
  const int wait_tokens =
      tokens_short ? SecondsUntil(tpm, b.tokens.level, static_cast<double>(tokens)) : 0;
  refused.retry_after_s = std::max(wait_requests, wait_tokens);
  if (wait_requests >= wait_tokens) {
    refused.limit = "requests";
    refused.message = Refusal(tenant, "requests", "RPM", limits.requests_per_minute,
                              b.requests.level, 1, refused.retry_after_s);
  } else {
    refused.limit = "tokens";
    refused.message = Refusal(tenant, "tokens", "TPM", limits.tokens_per_minute, b.tokens.level,
                              tokens, refused.retry_after_s);
  }
  return refused;
}

void TenantQuota::Refund(const std::string& tenant, int64_t tokens) {
  const TenantLimits limits = LimitsFor(tenant);
  if (limits.unlimited()) return;
  std::lock_guard lock(mu_);
  auto it = buckets_.find(tenant);
  if (it == buckets_.end()) return;
  Buckets& b = it->second;
  if (limits.requests_per_minute > 0) {
    b.requests.level =
        std::min(static_cast<double>(limits.requests_per_minute), b.requests.level + 1.0);
  }
  if (limits.tokens_per_minute > 0) {
    b.tokens.level = std::min(static_cast<double>(limits.tokens_per_minute),
                              b.tokens.level + static_cast<double>(std::max<int64_t>(tokens, 0)));
  }
}

}  // namespace pdserve::gateway
