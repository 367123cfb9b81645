#include "tests/fakes/fake_transport.h"

#include <cstring>

namespace pdserve::kv_transfer {

FakeTransport::FakeTransport(const KvLayout& layout, std::vector<const void*> layer_bases,
                             int num_pages, KvReceiver& receiver)
    : layout_(layout),
      bases_(std::move(layer_bases)),
      receiver_(receiver),
      peer_(receiver.AddPeer({[this](uint64_t id, const Status& why) {
                                table_.FailFromPeer(id, why.WithContext("KV receiver"));
                              },
                              nullptr})),
      table_(layout.n_layers, num_pages, [this](uint64_t id, const Status& why) {
        receiver_.FailFromPeer(peer_, id, table_.Secret(id), why);
      }) {}

FakeTransport::~FakeTransport() { DropConnection(); }

Status FakeTransport::Open(const OutgoingRequest& request) { return table_.Open(request); }

Status FakeTransport::PushLayer(uint64_t request_id, int layer) {
  if (layout_.hash != receiver_.layout().hash) {
    return FailedPrecondition("KV layout mismatch: " + layout_.ToString() + " vs " +
                              receiver_.layout().ToString());
  }
  PDSERVE_ASSIGN_OR_RETURN(auto chunks, table_.BeginLayer(request_id, layer, 1 << 30));
  const size_t page_bytes = layout_.page_bytes();
  for (const PageRun& c : chunks) {
    FrameHeader h;
    h.type = FrameType::kChunk;
    h.request_id = request_id;
    h.secret = table_.Secret(request_id);
    h.layout_hash = layout_.hash;
    h.layer = static_cast<uint32_t>(layer);
    h.first_page = c.dst_first;
    h.page_count = static_cast<uint32_t>(c.count);
    h.byte_count = c.count * page_bytes;
    auto target = receiver_.BeginChunk(peer_, h);
    if (!target.ok()) {
      table_.OnAck(request_id, h.layer, h.first_page, target.status());
      continue;
    }
    std::memcpy(target->dst,
                static_cast<const unsigned char*>(bases_[layer]) + c.src_first * page_bytes,
                target->bytes);
    const int64_t n = chunks_++;
    const int64_t fail_after = fail_after_.load();
    Status applied = fail_after >= 0 && n >= fail_after
                         ? DataLoss("KV chunk CRC32C mismatch (fake)")
                         : Status::Ok();
    table_.OnAck(request_id, h.layer, h.first_page, receiver_.EndChunk(peer_, h, applied));
  }
  return Status::Ok();
}

Status FakeTransport::Wait(uint64_t request_id) { return table_.Wait(request_id); }

void FakeTransport::Cancel(uint64_t request_id, std::string_view reason) {
  table_.Cancel(request_id, Status(StatusCode::kCancelled, std::string(reason)));
}

std::optional<TransferState> FakeTransport::State(uint64_t request_id) const {
  return table_.State(request_id);
}

void FakeTransport::DropConnection() {
  connected_ = false;
  receiver_.RemovePeer(peer_, Unavailable("KV peer lost (fake connection dropped)"));
  table_.FailAll(Unavailable("KV peer lost (fake connection dropped)"));
}

}  // namespace pdserve::kv_transfer
