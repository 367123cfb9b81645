// Fuzz target: the KV frames a peer sends a decode worker (kv_transfer/wire.h) as its KvReceiver
// takes them (kv_transfer/kv_receiver.h): chunks with their payloads, and cancels, from two
// connections, against two live reservations. The input is a sequence of frames whose fields
// are drawn from it, often close to what a real sender would send (the reservation's request
// id, secret, layout hash and pages) so that the checks behind each field are reached. Whatever
// arrives, a chunk is written only into its own request's reserved pages and only with the
// request's secret, and every page returns to the pool.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kv_transfer/kv_layout.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/wire.h"
#include "model/kv_pool.h"

namespace {

using namespace pdserve::kv_transfer;
using pdserve::Status;

constexpr int kLayers = 2;
constexpr int kPages = 8;

const KvLayout& Layout() {
  static const KvLayout layout = [] {
    auto made = KvLayout::Make("fuzz-model", pdserve::model::DType::kF32, kLayers,
                               /*n_kv_heads=*/1, /*head_dim=*/4, /*page_size=*/2);
    if (!made.ok()) abort();
    return *made;
  }();
  return layout;
}

// A header as a sender would build it, each field now and then replaced with the input's bytes.
FrameHeader DrawHeader(FuzzedDataProvider& in, const std::vector<Reservation>& reservations) {
  const KvLayout& layout = Layout();
  const Reservation& r =
      reservations[in.ConsumeIntegralInRange<size_t>(0, reservations.size() - 1)];
  const uint8_t wild = in.ConsumeIntegral<uint8_t>();  // which fields are the input's
  FrameHeader h;
  h.type = in.ConsumeBool() ? FrameType::kChunk : FrameType::kCancel;
  h.path = (wild & 1) ? static_cast<PayloadPath>(in.ConsumeIntegralInRange<uint8_t>(0, 2))
                      : PayloadPath::kTcp;
  h.request_id = (wild & 2) ? in.ConsumeIntegral<uint64_t>() : r.request_id;
  h.layout_hash = (wild & 4) ? in.ConsumeIntegral<uint64_t>() : layout.hash;
  h.layer = (wild & 8) ? in.ConsumeIntegral<uint32_t>()
                       : in.ConsumeIntegralInRange<uint32_t>(0, kLayers - 1);
  const size_t at = in.ConsumeIntegralInRange<size_t>(0, r.pages.size() - 1);
  h.first_page = (wild & 16) ? in.ConsumeIntegral<int32_t>() : r.pages[at];
  h.page_count = (wild & 32) ? in.ConsumeIntegral<uint32_t>()
                             : in.ConsumeIntegralInRange<uint32_t>(1, r.pages.size() - at);
  h.byte_count =
      (wild & 64) ? in.ConsumeIntegral<uint64_t>() : uint64_t{h.page_count} * layout.page_bytes();
  h.secret = r.secret;
  if (wild & 128) {
    const auto bytes = in.ConsumeBytes<unsigned char>(kTransferSecretBytes);
    std::copy(bytes.begin(), bytes.end(), h.secret.begin());
  }
  return h;
}

const Reservation* Owner(const std::vector<Reservation>& reservations, uint64_t id) {
  for (const auto& r : reservations) {
    if (r.request_id == id) return &r;
  }
  return nullptr;
}

// One receiver for the whole run (its deadline thread would cost more than an input): each input
// reserves under fresh request ids and leaves nothing behind.
struct Receiver {
  Receiver()
      : pool(kPages),
        memory(kLayers, std::vector<unsigned char>(Layout().page_bytes() * kPages)),
        receiver(Layout(), pool, Bases(memory)) {}
  static std::vector<void*> Bases(std::vector<std::vector<unsigned char>>& memory) {
    std::vector<void*> bases;
    for (auto& m : memory) bases.push_back(m.data());
    return bases;
  }
  pdserve::model::KvPagePool pool;
  std::vector<std::vector<unsigned char>> memory;  // [layer][page * page_bytes]
  KvReceiver receiver;
  uint64_t next_id = 1;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Receiver* state = new Receiver();  // lives as long as the process
  auto& [pool, memory, receiver, next_id] = *state;
  FuzzedDataProvider in(data, size);
  const size_t page_bytes = Layout().page_bytes();
  const auto deadline = Clock::now() + std::chrono::hours(1);
  std::vector<Reservation> reservations;
  for (int i = 0; i < 2; ++i) {  // one filled whole, one partly (room for generated tokens)
    auto r = receiver.Reserve(next_id++, i == 0 ? 3 : 4, deadline, i == 0 ? 0 : 2);
    if (!r.ok()) abort();
    reservations.push_back(*r);
  }
  const KvReceiver::PeerHooks hooks{[](uint64_t, const Status&) {}, [] {}};
  const KvReceiver::PeerId peers[2] = {receiver.AddPeer(hooks), receiver.AddPeer(hooks)};

  while (in.remaining_bytes() > 0) {
    const KvReceiver::PeerId peer = peers[in.ConsumeBool()];
    if (in.ConsumeIntegralInRange<int>(0, 15) == 0) {
      receiver.RemovePeer(peer, pdserve::Unavailable("connection lost"));
      continue;
    }
    const FrameHeader sent = DrawHeader(in, reservations);
    // Over the wire: what the receiver gets is what the sender encoded.
    auto parsed = ParseHeader(EncodeHeader(sent));
    if (!parsed.ok()) continue;  // refused before the receiver sees it
    const FrameHeader& h = *parsed;
    const Reservation* owner = Owner(reservations, h.request_id);
    if (h.type == FrameType::kCancel) {
      receiver.FailFromPeer(peer, h.request_id, h.secret,
                            Status(pdserve::StatusCode::kCancelled, "fuzz"));
      continue;
    }
    (void)receiver.PlausibleChunk(h);
    auto target = receiver.BeginChunk(peer, h);
    if (!target.ok()) continue;
    // Accepted: only with the request's secret, and only into its reserved pages.
    if (owner == nullptr || owner->secret != h.secret || h.layer >= kLayers) abort();
    const auto* dst = static_cast<unsigned char*>(target->dst);
    const auto* base = memory[h.layer].data();
    if (dst < base || target->bytes != h.page_count * page_bytes ||
        dst + target->bytes > base + memory[h.layer].size() || (dst - base) % page_bytes != 0) {
      abort();
    }
    for (uint32_t i = 0; i < h.page_count; ++i) {
      const int32_t page = static_cast<int32_t>((dst - base) / page_bytes) + i;
      if (!std::binary_search(owner->pages.begin(), owner->pages.end(), page)) abort();
    }
    if (h.path == PayloadPath::kTcp) {
      const auto payload = in.ConsumeBytes<unsigned char>(target->bytes);
      if (!payload.empty()) std::memcpy(target->dst, payload.data(), payload.size());
    }
    const Status applied = in.ConsumeIntegralInRange<int>(0, 7) == 0
                               ? pdserve::DataLoss("payload CRC mismatch")
                               : Status::Ok();
    (void)receiver.EndChunk(peer, h, applied);
  }
  // Done requests hand their pages on; the rest are cancelled or lost with their connection.
  for (const auto& r : reservations) {
    const auto state = receiver.State(r.request_id);
    if (state && *state == TransferState::kDone) {
      auto pages = receiver.TakePages(r.request_id);
      if (!pages.ok()) abort();
      pool.Free(*pages);
    } else {
      receiver.Cancel(r.request_id, "fuzz input ended");
    }
  }
  for (const auto peer : peers) receiver.RemovePeer(peer, pdserve::Unavailable("closed"));
  if (pool.used_pages() != 0) abort();  // every page went back
  return 0;
}
