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
  p.samples_drawn = s.samples_drawn();
  p.json_schema = s.json_schema();
  return p;
}

proto::Envelope StepReportMessage(const StepStats& stats,
                                  const std::function<uint64_t(uint64_t seq_id)>& request_of) {
  proto::Envelope report;
  proto::StepReport* step = report.mutable_step();
  step->set_seconds(stats.seconds);
  for (size_t i = 0; i < stats.seq_ids.size(); ++i) {
    step->add_request_ids(request_of(stats.seq_ids[i]));
    step->add_tokens(stats.seq_tokens[i]);
    step->add_prompt(stats.seq_prompt[i]);
  }
  return report;
}

}  // namespace pdserve::model
