#include "worker/messages.h"

#include "model/sampling_proto.h"

namespace pdserve::worker {

void ReportStep(GatewayLink& link, WorkerMetrics* metrics, model::StepLog* step_log,
                const model::StepStats& stats, const std::function<uint64_t(uint64_t)>& request_of,
                double* busy_seconds) {
  *busy_seconds += stats.seconds;
  if (metrics) metrics->AddStep(stats.seconds, stats.prompt_tokens, stats.decode_tokens);
  if (step_log && !stats.seq_ids.empty())
    step_log->Write({stats.shape, stats.seconds}, stats.start);
  if (!stats.seq_ids.empty()) link.Send(model::StepReportMessage(stats, request_of));
}

void ReportPreemptions(const model::Engine& engine, WorkerMetrics* metrics, int64_t* reported) {
  const int64_t now = engine.num_preemptions();
  if (metrics && now > *reported) metrics->AddPreemptions(now - *reported);
  *reported = now;
}

void ReportPrefixCache(model::Engine& engine, WorkerMetrics* metrics) {
  if (!metrics || !engine.prefix_cache()) return;
  metrics->SetPrefixCache(engine.prefix_cache_queries(), engine.prefix_cache_hits(),
                          engine.pages().cached_pages());
}

void SendPreempted(GatewayLink& link, uint64_t request_id) {
  proto::Envelope e;
  proto::RequestError* error = e.mutable_error();
  error->set_request_id(request_id);
  error->set_message("the decode worker ran out of KV pages and preempted this request");
  error->set_retryable(true);
  error->set_preempted(true);
  link.Send(e);
}

void SendRequestError(GatewayLink& link, uint64_t request_id, const std::string& message,
                      bool retryable, bool peer_failed, bool no_room) {
  proto::Envelope e;
  e.mutable_error()->set_request_id(request_id);
  e.mutable_error()->set_message(message);
  e.mutable_error()->set_retryable(retryable);
  e.mutable_error()->set_peer_failed(peer_failed);
  e.mutable_error()->set_no_room(no_room);
  link.Send(e);
}

}  // namespace pdserve::worker
