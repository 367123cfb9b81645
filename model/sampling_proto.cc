#include "model/sampling_proto.h"

namespace pdserve::model {

SamplingParams SamplingFromProto(const proto::Sampling& s) {
  SamplingParams p;
  p.temperature = s.temperature();
  p.top_p = s.top_p();
  p.top_k = s.top_k();
  if (s.has_seed()) p.seed = s.seed();
  p.max_tokens = s.max_tokens();
  p.ignore_eos = s.ignore_eos();
  p.stop_token_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
  return p;
}

}  // namespace pdserve::model
