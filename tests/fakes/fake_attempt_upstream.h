// FakeAttemptUpstream: an AttemptUpstream (gateway/attempt_upstream.h) and WorkerCapacity that
// a test drives by hand: Start records each attempt (or refuses it while `room` is false),
// Cancel records the id, and the test plays the attempt's side through the recorded listener
// (tokens, text, finish, failure, close). Single-threaded: the test calls it and runs the
// call's io_context itself.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gateway/attempt_upstream.h"

namespace pdserve::gateway {

class FakeAttemptUpstream : public AttemptUpstream, public WorkerCapacity {
 public:
  struct Started {
    AttemptSpec spec;
    // Weak, as the registry's hold ends with the attempt: the call owns its upstreams.
    std::weak_ptr<AttemptListener> listener;
  };

  bool room = true;  // Start succeeds
  std::vector<Started> started;
  std::vector<uint64_t> cancelled;
  int64_t largest_kv_tokens = 0;
  router::PrefillCapacity prefill;

  bool Start(const AttemptSpec& spec, std::shared_ptr<AttemptListener> listener) override {
    if (!room) return false;
    started.push_back({spec, listener});
    return true;
  }
  void Cancel(uint64_t id) override { cancelled.push_back(id); }
  int64_t LargestKvTokens() const override { return largest_kv_tokens; }
  router::PrefillCapacity Prefill() const override { return prefill; }

  // The last attempt started.
  const Started& last() const { return started.back(); }
  uint64_t last_id() const { return started.back().spec.id; }

  // Worker side: a batch of `tokens` (a finish reason ends the attempt).
  void SendTokens(const std::vector<int32_t>& tokens, const std::string& finish_reason = "",
                  bool last_is_stop_token = false) {
    proto::TokenBatch batch;
    for (int32_t t : tokens) batch.add_tokens(t);
    batch.set_finish_reason(finish_reason);
    batch.set_last_is_stop_token(last_is_stop_token);
    last().listener.lock()->AttemptTokens(last_id(), batch, std::chrono::steady_clock::now());
  }
  void Fail(const AttemptFault& fault) { last().listener.lock()->AttemptFailed(last_id(), fault); }
  // What the attempt used; by default its id only.
  void Close(AttemptUse use = {}) {
    use.workers.attempt_id = last_id();
    last().listener.lock()->AttemptClosed(use);
  }
};

}  // namespace pdserve::gateway
