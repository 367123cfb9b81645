// How one engine step's wall time is shared among the requests that ran in it
// (docs/architecture.md, "Cost model"): by the tokens each ran in the step, so a decode step (one
// token each) is shared equally, a prefill step by prompt tokens and a mixed step by both; a step
// whose counts are all zero is shared equally. The shares add up to the step's seconds, so no
// step time is lost between a worker's busy time and its requests' costs. WorkerRegistry charges
// every StepReport with it. Pure: safe from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pdserve::router {

// One share of `seconds` per entry of `tokens` (each count >= 0): seconds * tokens[i] / their
// sum, or seconds / tokens.size() each when the sum is zero. Empty for no entries.
std::vector<double> StepShares(double seconds, std::span<const int32_t> tokens);

}  // namespace pdserve::router
