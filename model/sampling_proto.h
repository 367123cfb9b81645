// The sampling parameters as they travel from the gateway to workers (proto::Sampling) and as the
// engine takes them (SamplingParams). Pure functions: any thread. Called by the workers.
#pragma once

#include "model/sampler.h"
#include "proto/control.pb.h"

namespace pdserve::model {

SamplingParams SamplingFromProto(const proto::Sampling& s);

}  // namespace pdserve::model
