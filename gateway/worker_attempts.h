// WorkerAttempts: attempts on self-hosted workers, over the worker registry
// (router/worker_registry.h): Start dispatches to a prefill and decode pair (or a colocated
// worker) that has room, avoiding the workers the request failed on while others can take it;
// the registry's sink calls reach the attempt's listener on its strand. One per gateway, shared
// by every call; any thread.
#pragma once

#include <memory>

#include "gateway/attempt_upstream.h"

namespace pdserve::gateway {

class WorkerAttempts : public AttemptUpstream, public WorkerCapacity {
 public:
  explicit WorkerAttempts(std::shared_ptr<router::WorkerRegistry> registry)
      : registry_(std::move(registry)) {}

  bool Start(const AttemptSpec& spec, std::shared_ptr<AttemptListener> listener) override;
  void Cancel(uint64_t id) override { registry_->Cancel(id); }
  int64_t LargestKvTokens() const override { return registry_->LargestKvTokens(); }
  router::PrefillCapacity Prefill() const override { return registry_->Prefill(); }
  int64_t CachedPromptTokens(const std::vector<int32_t>& prompt) const override {
    return registry_->CachedPromptTokens(prompt);
  }

 private:
  std::shared_ptr<router::WorkerRegistry> registry_;
};

}  // namespace pdserve::gateway
