// The two labels a ledger row carries, as enums: how an attempt ended (AttemptStatus) and which
// kind of capacity served a phase of it (CapacityClass). Their text (the ledger's column values,
// the metrics' labels, the report's keys) is written and read here only. Pure: any thread.
#pragma once

#include <string_view>

#include "common/status.h"

namespace pdserve::gateway {

// How an attempt ended. Accepted attempts (ok, cancelled) are request cost; the others retry
// waste (docs/architecture.md, "Cost model").
enum class AttemptStatus {
  kOk,         // "ok": it completed
  kCancelled,  // "cancelled": the client went away
  kError,      // "error": it failed and the request failed with it
  kRetried,    // "retried": it failed before any token reached the client; another attempt ran
  // "resumed": its tokens reached the client before its sequence was resumed on other workers;
  // they recompute its work (prompt and tokens so far), so its cost is retry waste.
  kResumed,
};

// What a phase of an attempt ran on.
enum class CapacityClass {
  kNone,      // "": no worker ran this phase (its WorkerRef has id 0)
  kReserved,  // "reserved": paid for whether busy or not
  kBurst,     // "burst": started on demand, paid while up
  // "api": an external model API (gateway/external_call.h), priced per token, not per GPU-hour,
  // and outside the conservation of self-hosted capacity.
  kApi,
};

std::string_view ToString(AttemptStatus status);
std::string_view ToString(CapacityClass capacity_class);
// The text ToString gives back to the enum; InvalidArgument naming the text otherwise.
Result<AttemptStatus> ParseAttemptStatus(std::string_view text);
Result<CapacityClass> ParseCapacityClass(std::string_view text);

// ok and cancelled: the attempt's cost is the request's; any other is retry waste.
bool IsAcceptedStatus(AttemptStatus status);

}  // namespace pdserve::gateway
