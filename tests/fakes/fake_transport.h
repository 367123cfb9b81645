// FakeTransport: a Transport that hands chunks straight to a KvReceiver in the same process
// (memcpy, same validation and bookkeeping as the network transports), for tests of code that
// sends KV (prefill worker, engine) without sockets. Knobs let tests refuse chunks.
// Thread-safe like Transport; the KvReceiver must outlive it.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/outgoing_transfers.h"
#include "kv_transfer/transport.h"

namespace pdserve::kv_transfer {

class FakeTransport final : public Transport {
 public:
  // `layer_bases`: the sender's pools (`num_pages` pages each, host memory).
  FakeTransport(const KvLayout& layout, std::vector<const void*> layer_bases, int num_pages,
                KvReceiver& receiver);
  ~FakeTransport() override;

  const KvLayout& layout() const override { return layout_; }
  Status Open(const OutgoingRequest& request) override;
  Status PushLayer(uint64_t request_id, int layer) override;
  Status Wait(uint64_t request_id) override;
  void Cancel(uint64_t request_id, std::string_view reason) override;
  std::optional<TransferState> State(uint64_t request_id) const override;
  bool connected() const override { return connected_; }

  // Simulates the connection dropping: both sides fail this peer's requests.
  void DropConnection();
  // Every chunk after this many is corrupted (applied as a CRC failure). -1: never.
  void FailChunksAfter(int64_t n) { fail_after_ = n; }

 private:
  const KvLayout layout_;
  const std::vector<const void*> bases_;
  KvReceiver& receiver_;
  KvReceiver::PeerId peer_;
  std::atomic<int64_t> chunks_{0};
  std::atomic<int64_t> fail_after_{-1};
  std::atomic<bool> connected_{true};
  OutgoingTransfers table_;
};

}  // namespace pdserve::kv_transfer
