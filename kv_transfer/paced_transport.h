// PacedTransport: a Transport (transport.h) that hands every call to another and makes each
// request take at least the time its KV would take on a link of a given bandwidth: the KV of
// simulated workers (model/sim/sim_backend.h) holds no real values and moves as small pages
// through the real transport code, and this adds the time the real model's bytes would take.
// The link is shared by every request on this transport: a layer's bytes start once the layer
// was pushed and the link has sent what came before, so layers overlap with the prompt's compute
// as a real push does. Safe to call from any thread, as the transport it wraps.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "kv_transfer/transport.h"

namespace pdserve::kv_transfer {

struct PacedLink {
  double bytes_per_page_layer = 0;  // one page of one layer in the real model
  double bytes_per_second = 0;      // 0: no pacing
};

class PacedTransport final : public Transport {
 public:
  PacedTransport(std::unique_ptr<Transport> inner, PacedLink link);

  const KvLayout& layout() const override { return inner_->layout(); }
  Status Open(const OutgoingRequest& request) override;
  Status PushLayer(uint64_t request_id, int layer) override;
  // The inner Wait, then until the request's last layer has crossed the paced link (or its
  // deadline, DeadlineExceeded, as a real transfer that slow would fail).
  Status Wait(uint64_t request_id) override;
  void Cancel(uint64_t request_id, std::string_view reason) override;
  std::optional<TransferState> State(uint64_t request_id) const override {
    return inner_->State(request_id);
  }
  bool connected() const override { return inner_->connected(); }

 private:
  struct Paced {
    size_t pages = 0;
    Clock::time_point deadline, done_at;
  };

  std::unique_ptr<Transport> inner_;
  const PacedLink link_;
  std::mutex mu_;
  Clock::time_point link_free_at_;                // guarded by mu_
  std::unordered_map<uint64_t, Paced> requests_;  // guarded by mu_
};

}  // namespace pdserve::kv_transfer
