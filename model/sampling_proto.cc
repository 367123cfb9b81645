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
  p.n = s.n() == 0 ? 1 : s.n();  // unset: one choice
  p.prompt_logprobs = s.prompt_logprobs();
  p.json_schema = s.json_schema();
  p.json_prefix = s.json_prefix();
  p.json_suffix = s.json_suffix();
  p.logprobs = s.logprobs() ? s.top_logprobs() : -1;
  for (const proto::LogitBias& b : s.logit_bias()) p.logit_bias.emplace_back(b.token(), b.bias());
  return p;
}

void AddLogprobs(const TokenEvent& event, proto::TokenBatch* batch) {
  for (size_t i = 0; i < event.prompt_logprobs.size(); ++i) {
    batch->add_prompt_logprobs(event.prompt_logprobs[i]);
    proto::TopLogprobs* top = batch->add_prompt_top_logprobs();
    if (i >= event.prompt_top_logprobs.size()) continue;
    for (const auto& [id, logprob] : event.prompt_top_logprobs[i]) {
      top->add_ids(id);
      top->add_logprobs(logprob);
    }
  }
  if (!event.has_logprob) return;
  batch->add_logprobs(event.logprob);
  proto::TopLogprobs* top = batch->add_top_logprobs();
  for (const auto& [id, logprob] : event.top_logprobs) {
    top->add_ids(id);
    top->add_logprobs(logprob);
  }
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
