// KvEventPublisher: turns a worker's engine KV events (model/prefix_cache.h) into the KvEvents and
// KvSnapshot messages of its registration (proto/control.proto). The engine numbers its events
// from its start; the wire numbers them per registration: after each (re)registration nothing is
// sent until the gateway's KvResyncRequest, answered with a KvSnapshot of every cached block and
// the wire seq the following KvEvents continue from. Engine events the snapshot covers are dropped;
// later ones get consecutive wire seqs. When the engine's own numbers skip (its event log
// overflowed), the next KvEvents skips a wire seq too, so that the gateway sees the gap and asks
// for a snapshot (it ignores snapshots it did not ask for). A worker with its prefix cache off
// answers every resync with an empty snapshot and sends no events.
// Used by every worker role; engine thread only (it is not thread-safe).
#pragma once

#include <cstdint>
#include <vector>

#include "model/engine.h"
#include "model/prefix_cache.h"
#include "proto/control.pb.h"
#include "worker/gateway_link.h"

namespace pdserve::worker {

class KvEventPublisher {
 public:
  // A new registration: nothing is published until Resync.
  void Restart();
  // Answers the gateway's KvResyncRequest with `cached` (the engine's CachedBlocks) as a
  // KvSnapshot; engine events up to cached.seq are covered by it.
  proto::Envelope Resync(const model::KvCacheSnapshot& cached);
  // The KvEvents messages for `events` (the engine's TakeKvEvents, in order): none before the
  // first Resync of a registration, or for events a snapshot covers.
  std::vector<proto::Envelope> Publish(const std::vector<model::KvCacheEvent>& events);

  // The engine's side: each does nothing when `engine` runs without a prefix cache.
  // Sends what the engine recorded since the last call (after each step, and after anything
  // that allocates KV pages).
  void SendEvents(model::Engine& engine, GatewayLink& link);
  // Sends the KvSnapshot answering a KvResyncRequest.
  void SendSnapshot(model::Engine& engine, GatewayLink& link);

  uint64_t wire_seq() const { return wire_seq_; }

 private:
  bool synced_ = false;      // a snapshot was sent on this registration
  uint64_t wire_seq_ = 0;    // the last seq sent (a snapshot's, or a KvEvents')
  uint64_t engine_seq_ = 0;  // the engine's seq that wire_seq_ stands for
};

}  // namespace pdserve::worker
