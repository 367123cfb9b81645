// The kind of capacity that serves work, as an enum with its text in one place: what a worker
// registers as (`--capacity-class`, Register.capacity_class on the wire), what the router and the
// planner count, and what a ledger row and the metrics' `class` label say. Pure: any thread.
#pragma once

#include <string_view>

#include "common/status.h"

namespace pdserve {

enum class CapacityClass {
  kNone,      // "": nothing ran (a ledger row's phase with no worker: its WorkerRef has id 0)
  kReserved,  // "reserved": paid for whether busy or not
  kBurst,     // "burst": started on demand, paid while up
  // "api": an external model API, priced per token, not per GPU-hour, and outside the
  // conservation of self-hosted capacity.
  kApi,
};

std::string_view ToString(CapacityClass capacity_class);
// The text ToString gives back to the enum; InvalidArgument naming the text otherwise.
Result<CapacityClass> ParseCapacityClass(std::string_view text);
// What a worker may register as: reserved or burst; InvalidArgument naming the text otherwise.
Result<CapacityClass> ParseWorkerCapacityClass(std::string_view text);

}  // namespace pdserve
