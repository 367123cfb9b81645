// The two labels a ledger row carries, as enums: how an attempt ended (AttemptStatus, here) and
// which kind of capacity served a phase of it (CapacityClass, common/capacity_class.h, shared with
// the workers, the router and the planner). The status's text (the ledger's column values, the
// metrics' labels, the report's keys) is written and read here only. Pure: any thread.
#pragma once

#include <string_view>

#include "common/capacity_class.h"
#include "common/status.h"

namespace pdserve::ledger {

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
  // "refused": the request never ran: admission refused it for its TTFT objective (429) or its
  // wait in the queue passed its deadline (503). It cost nothing; its row keeps the prediction
  // and the decision (AttemptRow::admission).
  kRefused,
};

std::string_view ToString(AttemptStatus status);
// The text ToString gives back to the enum; InvalidArgument naming the text otherwise.
Result<AttemptStatus> ParseAttemptStatus(std::string_view text);

// ok and cancelled: the attempt's cost is the request's; any other is retry waste.
bool IsAcceptedStatus(AttemptStatus status);

}  // namespace pdserve::ledger
