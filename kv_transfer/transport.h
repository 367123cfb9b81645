// Transport: the sending side of the KV hand-over from a prefill worker to one decode worker
// (docs/architecture.md, "A request's life", step 4). The decode worker reserved pages for the
// request (KvReceiver::Reserve) and told the prefill worker their ids; the prefill worker Opens the
// request with its own page ids mapped onto those, pushes each layer as it finishes, and Waits
// until every chunk was acknowledged after being applied, or the request Failed.
// Many requests share one Transport (one connection to one peer). Implementations:
// TcpTransport (tcp_transport.h), with the TCP, NCCL or CUDA-IPC payload path, and FakeTransport
// (tests/fakes/fake_transport.h) for tests. All methods are safe to call from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kv_transfer/kv_layout.h"
#include "kv_transfer/wire.h"

namespace pdserve::kv_transfer {

using Clock = std::chrono::steady_clock;

// A request's transfer state. It only moves forward: Reserved -> Receiving -> Done, or to Failed
// from any state but Done; Failed is final. On the sending side Reserved means opened and
// Receiving means bytes are in flight.
enum class TransferState : uint8_t { kReserved, kReceiving, kDone, kFailed };
std::string_view TransferStateName(TransferState s);

struct OutgoingRequest {
  uint64_t request_id = 0;
  std::vector<int32_t> src_pages;  // page ids in the sender's pool, in block-table order
  std::vector<int32_t> dst_pages;  // the receiver's reservation for the request, same order
  Clock::time_point deadline;      // the request Fails if not Done by then
  TransferSecret secret{};         // the reservation's (Reserved.transfer_secret)
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const KvLayout& layout() const = 0;

  // Registers a request. Refuses a duplicate id, page lists of different lengths, page ids out
  // of the sender's pool, or a deadline already past; Unavailable once the peer is lost.
  virtual Status Open(const OutgoingRequest& request) = 0;
  // Sends one layer of the request: its pages, coalesced into runs. Returns once queued; the
  // source pages must keep their bytes until Wait returns. Each layer is pushed once.
  virtual Status PushLayer(uint64_t request_id, int layer) = 0;
  // Blocks until every layer was pushed and acknowledged (OK) or the request Failed (its
  // status), never past the request's deadline. Forgets the request afterwards.
  virtual Status Wait(uint64_t request_id) = 0;
  // Fails the request (Cancelled) here and tells the peer, which frees its pages.
  virtual void Cancel(uint64_t request_id, std::string_view reason) = 0;
  // nullopt for an unknown (or already waited-for) request.
  virtual std::optional<TransferState> State(uint64_t request_id) const = 0;
  // False once the connection to the peer is lost; a new Transport must be made.
  virtual bool connected() const = 0;
};

}  // namespace pdserve::kv_transfer
