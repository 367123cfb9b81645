// OutgoingTransfers: the sending side's per-request bookkeeping, shared by the Transport
// implementations: page runs, which layers were pushed, which chunks await their ack, state
// (Reserved -> Receiving -> Done, or Failed, final), deadlines and waiting. It knows nothing of
// the wire: a transport asks it which chunks to send and reports acks and failures to it.
// Thread-safe: every method may be called from any thread. `on_local_failure` runs with no
// lock held, on the thread that caused the failure (the deadline watchdog's, or Cancel's caller).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kv_transfer/deadline_watchdog.h"
#include "kv_transfer/page_runs.h"
#include "kv_transfer/transport.h"

namespace pdserve::kv_transfer {

class OutgoingTransfers {
 public:
  // A request failed here (deadline, Cancel): the transport tells its peer.
  using LocalFailureFn = std::function<void(uint64_t request_id, const Status& why)>;

  // num_pages: the sender's pool size, to check source page ids.
  OutgoingTransfers(int n_layers, int num_pages, LocalFailureFn on_local_failure);
  ~OutgoingTransfers();

  Status Open(const OutgoingRequest& request);
  // The chunks of one layer (SplitRuns: at most max_chunk_pages pages each, growing from
  // lead_chunk_pages when that is > 0), now awaiting acks. Refuses an unknown or final request,
  // a layer out of range or pushed before.
  Result<std::vector<PageRun>> BeginLayer(uint64_t request_id, int layer, int32_t max_chunk_pages,
                                          int32_t lead_chunk_pages = 0);
  // The peer acknowledged a chunk (identified by layer and destination first page). A failing
  // status fails the request; an ack for no outstanding chunk is ignored (and logged).
  void OnAck(uint64_t request_id, uint32_t layer, int32_t dst_first, const Status& status);
  // Fails a request on the peer's word or a send error; the peer is not told.
  void FailFromPeer(uint64_t request_id, const Status& why);
  // The connection is gone: every unfinished request Fails; later Opens are refused.
  void FailAll(const Status& why);
  Status Wait(uint64_t request_id);
  void Cancel(uint64_t request_id, const Status& why);
  std::optional<TransferState> State(uint64_t request_id) const;
  // The secret the request was opened with, for its chunks and cancels (zero once forgotten).
  TransferSecret Secret(uint64_t request_id) const;
  // Whether a request can still use the connection (for dropping queued chunks).
  bool Live(uint64_t request_id) const;

 private:
  struct Request {
    TransferState state = TransferState::kReserved;
    Status status;
    std::vector<PageRun> runs;
    std::vector<uint8_t> pushed;  // [n_layers]
    int layers_pushed = 0;
    std::multiset<std::pair<uint32_t, int32_t>> unacked;  // (layer, dst_first)
    TransferSecret secret{};
  };

  // Returns true when it moved the request to Failed. Requires mu_.
  bool FailLocked(uint64_t id, Request& r, const Status& why);
  void OnDeadline(uint64_t id);

  const int n_layers_;
  const int num_pages_;
  const LocalFailureFn on_local_failure_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<uint64_t, Request> requests_;  // guarded by mu_
  Status lost_;                                     // guarded by mu_: set once the peer is lost
  DeadlineWatchdog watchdog_;                       // last: stops before the map goes
};

}  // namespace pdserve::kv_transfer
