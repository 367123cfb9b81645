// What a request attempt's owner (an HTTP session's call) and the WorkerRegistry say to each
// other: the sink that receives the attempt's tokens, its failure and, last, what it used
// (router/worker_registry.h dispatches attempts to a RequestSink). Plain types; a sink's
// methods are called from the registry's io_context threads, never under its lock.
#pragma once

#include <cstdint>
#include <string>

#include "proto/control.pb.h"

namespace pdserve::router {

// What one attempt used: its workers (as registered) and the step time attributed to it.
struct AttemptUsage {
  uint64_t attempt_id = 0;
  uint64_t prefill_worker = 0, decode_worker = 0;  // the same worker when colocated
  proto::Register prefill_info, decode_info;
  double prefill_step_seconds = 0;  // its share of steps on the prefill side (prompt work)
  double decode_step_seconds = 0;   // its share of decode steps
  int64_t kv_bytes = 0;
  // How it was placed (Route::placement, Route::placement_reason): what its ledger row records.
  std::string placement;
  std::string placement_reason;
};

// Why an attempt ended without finishing: a worker refused it or was lost.
struct AttemptFailure {
  std::string message;
  bool retryable = false;  // it did not start: another attempt may take it
  // A decode worker had no free KV pages for it now: it may wait for room, on that worker too.
  bool no_room = false;
  uint64_t failed_worker = 0;  // the one to avoid on a retry (unless no_room or preempted)
  // A decode worker preempted it for want of pages (retryable): it resumes where there is room,
  // on that worker too.
  bool preempted = false;
};

// What a request's owner (an HTTP session's call) receives from its workers.
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  virtual void OnTokens(const proto::TokenBatch& batch) = 0;
  virtual void OnFailure(const AttemptFailure& failure) = 0;
  // Called once per attempt, last, when no worker holds it any more.
  virtual void OnAttemptClosed(const AttemptUsage& cost) = 0;
};

}  // namespace pdserve::router
