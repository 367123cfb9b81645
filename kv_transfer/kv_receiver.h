// KvReceiver: the decode worker's side of the KV hand-over. It reserves pages of the worker's
// KvPagePool for a request, accepts chunks from transports (validating every field a peer sends
// against the reservation), tracks each request's state (Reserved -> Receiving -> Done, or
// Failed, which is final), fails requests at their deadline, on Cancel and when their peer is
// lost, and frees a Failed request's pages. A Done request's pages pass to the engine with
// TakePages. Chunk bytes are written straight into the pool memory given as per-layer bases
// (host or device memory, KvCacheShape layout), by the transport, between BeginChunk and
// EndChunk; a request's pages are never freed while such a write is in progress.
// Thread-safe: every method may be called from any thread. It must outlive its transports.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "kv_transfer/deadline_watchdog.h"
#include "kv_transfer/kv_layout.h"
#include "kv_transfer/transport.h"
#include "kv_transfer/wire.h"
#include "model/kv_pool.h"

namespace pdserve::kv_transfer {

struct Reservation {
  uint64_t request_id = 0;
  std::vector<int32_t> pages;  // ascending, so runs coalesce; the request's block table
  uint64_t layout_hash = 0;
  // Random (128 bits from the OS's generator), for the one sender the gateway names: every chunk
  // and cancel for the reservation must carry it (Reserved.transfer_secret).
  TransferSecret secret{};
};

class KvReceiver {
 public:
  using PeerId = uint64_t;
  // How the receiver reaches a transport's connection.
  struct PeerHooks {
    // A request bound to this peer failed here (deadline, cancel): tell the sender.
    std::function<void(uint64_t request_id, const Status& why)> notify_failed;
    // Close the connection: a chunk write into a failed request's pages is stuck.
    std::function<void()> abort;
  };
  // Where a chunk's bytes go: one contiguous range of one layer's pool.
  struct ChunkTarget {
    void* dst = nullptr;
    size_t bytes = 0;
  };

  // `layer_bases[l]` is layer l's pool ([pool.num_pages()] pages of layout.page_bytes()).
  KvReceiver(KvLayout layout, model::KvPagePool& pool, std::vector<void*> layer_bases);
  ~KvReceiver();
  KvReceiver(const KvReceiver&) = delete;
  KvReceiver& operator=(const KvReceiver&) = delete;

  const KvLayout& layout() const { return layout_; }
  model::KvPagePool& pool() { return pool_; }
  void* layer_base(int layer) const { return layer_bases_[layer]; }

  // Allocates num_pages pages (all or none) for a new request, due by `deadline`. The transfer
  // fills the first `filled_pages` of them (0: all) and is Done when every layer of those is
  // applied; the rest are room for the tokens the decode worker will generate. Chunks for the
  // rest are refused.
  Result<Reservation> Reserve(uint64_t request_id, int num_pages, Clock::time_point deadline,
                              int filled_pages = 0);
  // Blocks until the request is Done (OK) or Failed (its status). Bounded by its deadline.
  Status Wait(uint64_t request_id);
  // A Done request's pages, now owned by the caller (the engine frees them); forgets it.
  Result<std::vector<int32_t>> TakePages(uint64_t request_id);
  // Fails the request (Cancelled), frees its pages and tells its peer. No-op once Done/Failed.
  void Cancel(uint64_t request_id, std::string_view reason);
  std::optional<TransferState> State(uint64_t request_id) const;
  int requests() const;  // known requests, Failed ones included until they are pruned

  // A sender that copies a chunk before it sends the chunk's header (CUDA IPC) may still be
  // writing a request's pages when the request Fails here, and keeps copying until it hears of
  // the failure. From this call on, a Failed request's pages wait before they return to the
  // pool, so that no other request gets them meanwhile: `hold` for a request bound to its sender
  // (told at once, it stops within a round trip and the layer it is on); for one that no chunk
  // has reached yet, whose sender cannot be told and learns only from its first refused chunk,
  // until `hold` past the request's deadline, at which the sender's side fails too. The KV
  // listener calls it when it accepts such a sender. 0 (the default, and enough for TCP and NCCL,
  // whose bytes land only after the header is accepted): at once.
  void HoldFailedPages(Clock::duration hold);
  int held_pages() const;  // pages of Failed requests waiting out the hold

  // --- For transports ---
  PeerId AddPeer(PeerHooks hooks);
  // The peer's connection is gone: all its unfinished requests Fail with `why`.
  void RemovePeer(PeerId peer, const Status& why);
  // Validates a chunk header (layout hash, byte count for the path, layer, page range, then the
  // request and its transfer secret, its state and peer) and pins the request's pages until
  // EndChunk. A request id nobody reserved and a wrong secret get one and the same answer, which
  // names neither, and change nothing: a peer without the secret can neither write into a
  // reservation nor learn which ids exist. The first chunk binds the request to the peer;
  // another peer's chunks are refused.
  Result<ChunkTarget> BeginChunk(PeerId peer, const FrameHeader& h);
  // `applied`: OK when the bytes are in place (CRC verified); otherwise the request Fails with
  // it. Returns the status to acknowledge the chunk with.
  Status EndChunk(PeerId peer, const FrameHeader& h, const Status& applied);
  // Fails a request on the peer's word (a kCancel frame from the sender), when `secret` is the
  // reservation's; anything else is ignored.
  void FailFromPeer(PeerId peer, uint64_t request_id, const TransferSecret& secret,
                    const Status& why);
  // Whether a chunk header's byte count is one this receiver would ever accept; a transport
  // drains the payload of a refused chunk only when it is, and drops the connection otherwise.
  bool PlausibleChunk(const FrameHeader& h) const;

 private:
  struct Request {
    TransferState state = TransferState::kReserved;
    Status status;                 // why it Failed
    std::vector<int32_t> pages;    // ascending
    int filled_pages = 0;          // the first ones, which the transfer fills
    std::vector<uint8_t> claimed;  // [n_layers][pages]: a chunk covered it
    int64_t applied_pages = 0;     // over all layers
    int pins = 0;                  // chunks being written
    PeerId peer = 0;               // 0 until the first chunk
    Clock::time_point deadline;    // as reserved
    TransferSecret secret{};
  };

  // Moves the request to Failed (if it is not final yet), frees its pages unless pinned, wakes
  // waiters. Returns the peer to notify (0: none). Requires mu_.
  PeerId FailLocked(uint64_t id, Request& r, const Status& why);
  void FreeLocked(Request& r);
  // Returns held pages whose hold has passed; the watchdog's kHoldTimer calls it at the next.
  void ReleaseHeldLocked(Clock::time_point now);
  void Retire(uint64_t id);  // requires mu_: remembers a final request for State/Wait, bounded
  void OnDeadline(uint64_t id);
  void NotifyPeer(PeerId peer, uint64_t id, const Status& why, bool abort);

  const KvLayout layout_;
  model::KvPagePool& pool_;
  const std::vector<void*> layer_bases_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<uint64_t, Request> requests_;  // guarded by mu_
  std::deque<uint64_t> retired_;                    // guarded by mu_: final, oldest first
  std::unordered_map<PeerId, PeerHooks> peers_;     // guarded by mu_
  PeerId next_peer_ = 1;                            // guarded by mu_
  Clock::duration failed_hold_{};                   // guarded by mu_
  // Guarded by mu_: pages of Failed requests, by when they may return to the pool.
  std::multimap<Clock::time_point, std::vector<int32_t>> held_;
  int held_pages_ = 0;         // guarded by mu_
  DeadlineWatchdog watchdog_;  // last: stops before the maps go
};

}  // namespace pdserve::kv_transfer
