// The engine's types as they travel on the control connection: sampling parameters from the
// gateway (proto::Sampling -> SamplingParams) and a step's wall time and requests to it
// (StepStats -> StepReport). Pure functions: any thread. Called by the prefill and decode workers.
#pragma once

#include <cstdint>
#include <functional>

#include "model/engine.h"
#include "model/sampler.h"
#include "proto/control.pb.h"

namespace pdserve::model {

SamplingParams SamplingFromProto(const proto::Sampling& s);

// Appends a token's log-probabilities (when it has them), and the prompt's (on a first token's
// event that has them), to the batch that carries it.
void AddLogprobs(const TokenEvent& event, proto::TokenBatch* batch);

// The StepReport of one step; `request_of` maps an engine sequence to its request (0: none).
proto::Envelope StepReportMessage(const StepStats& stats,
                                  const std::function<uint64_t(uint64_t seq_id)>& request_of);

}  // namespace pdserve::model
