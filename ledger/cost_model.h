// The cost model of docs/architecture.md ("Cost model (the ledger)") as pure functions: what a
// worker's GPU time costs and what an attempt cost. (How one engine step's wall time is shared
// among its requests is the registry's, router/step_shares.h, which charges each attempt its step
// seconds.) The gateway calls them when it writes a ledger row; the report calls them to split
// costs by phase and capacity class. No state: safe from any thread.
#pragma once

#include <cstdint>
#include <string>

namespace pdserve::gateway {

inline constexpr char kReservedClass[] = "reserved";
inline constexpr char kBurstClass[] = "burst";
// An external model API (gateway/external_call.h): priced per token, not per GPU-hour, and
// outside the conservation of self-hosted capacity.
inline constexpr char kApiClass[] = "api";

// A worker as its Register described it, copied into each ledger row so a row stays priced
// after the worker is gone.
struct WorkerRef {
  uint64_t id = 0;                // the gateway's id for the worker; 0: no worker (none ran)
  std::string name;               // the worker's name (host:pid or --name)
  std::string role;               // "prefill", "decode" or "both"
  std::string capacity_class;     // kReservedClass, kBurstClass or kApiClass
  std::string zone;               // where its KV lives; crossing zones is charged egress
  double price_per_gpu_hour = 0;  // USD
  int gpu_count = 1;
};

// USD for `seconds` of step wall time on a worker: seconds * gpu_count * price_per_gpu_hour /
// 3600. Also the capacity cost of `seconds` of uptime.
double ComputeCostUsd(double seconds, const WorkerRef& w);

// USD for moving `kv_bytes` from the prefill worker to the decode worker: charged only when
// both zones are named and differ.
double EgressCostUsd(int64_t kv_bytes, const WorkerRef& from, const WorkerRef& to,
                     double usd_per_gb);

// An attempt's cost by part; total() is what the ledger row's cost_usd holds.
struct AttemptCost {
  double prefill_usd = 0;
  double decode_usd = 0;
  double egress_usd = 0;
  double total() const { return prefill_usd + decode_usd + egress_usd; }
};
AttemptCost PriceAttempt(double prefill_step_seconds, const WorkerRef& prefill,
                         double decode_step_seconds, const WorkerRef& decode, double egress_usd);

}  // namespace pdserve::gateway
