#include "worker/kv_event_publisher.h"

#include <spdlog/spdlog.h>

namespace pdserve::worker {

void KvEventPublisher::Restart() {
  synced_ = false;
  wire_seq_ = 0;
  engine_seq_ = 0;
}

proto::Envelope KvEventPublisher::Resync(const model::KvCacheSnapshot& cached) {
  synced_ = true;
  engine_seq_ = cached.seq;
  proto::Envelope m;
  proto::KvSnapshot* s = m.mutable_kv_snapshot();
  s->set_seq(wire_seq_);
  s->mutable_blocks()->Add(cached.blocks.begin(), cached.blocks.end());
  return m;
}

std::vector<proto::Envelope> KvEventPublisher::Publish(
    const std::vector<model::KvCacheEvent>& events) {
  std::vector<proto::Envelope> out;
  if (!synced_) return out;
  for (const model::KvCacheEvent& e : events) {
    if (e.seq <= engine_seq_) continue;  // in the snapshot already
    if (e.seq != engine_seq_ + 1) {
      // Events were lost: skip a wire seq, and the gateway asks for a snapshot.
      spdlog::warn("the engine dropped KV events {}..{}; the gateway will resync", engine_seq_ + 1,
                   e.seq - 1);
      ++wire_seq_;
    }
    engine_seq_ = e.seq;
    proto::Envelope m;
    proto::KvEvents* k = m.mutable_kv_events();
    k->set_seq(++wire_seq_);
    for (const model::StoredBlock& b : e.stored) {
      proto::StoredBlock* s = k->add_stored();
      s->set_key(b.key);
      s->set_parent(b.parent);
    }
    k->mutable_removed()->Add(e.removed.begin(), e.removed.end());
    out.push_back(std::move(m));
  }
  return out;
}

void KvEventPublisher::SendEvents(model::Engine& engine, GatewayLink& link) {
  if (!engine.prefix_cache()) return;
  for (const proto::Envelope& m : Publish(engine.TakeKvEvents())) link.Send(m);
}

void KvEventPublisher::SendSnapshot(model::Engine& engine, GatewayLink& link) {
  if (!engine.prefix_cache()) {  // it holds nothing, and never will
    link.Send(Resync(model::KvCacheSnapshot{}));
    return;
  }
  // Events recorded before the snapshot and not yet taken are covered by it.
  SendEvents(engine, link);
  link.Send(Resync(engine.CachedBlocks()));
}

}  // namespace pdserve::worker
