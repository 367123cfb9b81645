#include "kv_transfer/kv_receiver.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <spdlog/spdlog.h>

#include <algorithm>

#include <fmt/format.h>

namespace pdserve::kv_transfer {
namespace {

// The one answer to a chunk whose request id and secret match no reservation: it says nothing
// about which of the two was wrong.
constexpr const char* kNoSuchReservation =
    "KV chunk: no reservation matches its request and secret";

// In constant time, so that timing tells nothing about how much of a guess was right.
bool SecretMatches(const TransferSecret& mine, const TransferSecret& theirs) {
  return CRYPTO_memcmp(mine.data(), theirs.data(), mine.size()) == 0;
}

// Failed requests remembered for State and Wait after their pages are freed.
constexpr size_t kRetiredKept = 4096;
// The watchdog's id for the release of held pages; Reserve refuses it as a request id.
constexpr uint64_t kHoldTimer = ~uint64_t{0};

}  // namespace

std::string_view TransferStateName(TransferState s) {
  switch (s) {
    case TransferState::kReserved:
      return "Reserved";
    case TransferState::kReceiving:
      return "Receiving";
    case TransferState::kDone:
      return "Done";
    case TransferState::kFailed:
      return "Failed";
  }
  return "?";
}

KvReceiver::KvReceiver(KvLayout layout, model::KvPagePool& pool, std::vector<void*> layer_bases)
    : layout_(std::move(layout)),
      pool_(pool),
      layer_bases_(std::move(layer_bases)),
      watchdog_([this](uint64_t id) { OnDeadline(id); }) {}

KvReceiver::~KvReceiver() {
  std::lock_guard lock(mu_);
  failed_hold_ = Clock::duration::zero();
  for (auto& [id, r] : requests_) {
    if (r.state != TransferState::kDone) FreeLocked(r);
  }
  ReleaseHeldLocked(Clock::time_point::max());
}

void KvReceiver::HoldFailedPages(Clock::duration hold) {
  std::lock_guard lock(mu_);
  failed_hold_ = std::max(hold, Clock::duration::zero());
}

int KvReceiver::held_pages() const {
  std::lock_guard lock(mu_);
  return held_pages_;
}

void KvReceiver::ReleaseHeldLocked(Clock::time_point now) {
  while (!held_.empty() && held_.begin()->first <= now) {
    pool_.Free(held_.begin()->second);
    held_pages_ -= static_cast<int>(held_.begin()->second.size());
    held_.erase(held_.begin());
  }
  if (!held_.empty()) watchdog_.Schedule(kHoldTimer, held_.begin()->first);
}

Result<Reservation> KvReceiver::Reserve(uint64_t request_id, int num_pages,
                                        Clock::time_point deadline, int filled_pages) {
  if (num_pages <= 0) return InvalidArgument("KV reserve: a request needs at least one page");
  if (filled_pages == 0) filled_pages = num_pages;
  if (filled_pages < 0 || filled_pages > num_pages) {
    return InvalidArgument(
        fmt::format("KV reserve: {} pages to fill out of {}", filled_pages, num_pages));
  }
  if (static_cast<int>(layer_bases_.size()) != layout_.n_layers) {
    return Internal("KV receiver: layer bases do not match the layout's layers");
  }
  if (deadline <= Clock::now())
    return Status(StatusCode::kDeadlineExceeded, "KV reserve: past deadline");
  if (request_id == kHoldTimer) {
    return InvalidArgument(fmt::format("KV reserve: request id {} is reserved", request_id));
  }
  std::lock_guard lock(mu_);
  if (requests_.count(request_id)) {
    return Status(StatusCode::kAlreadyExists,
                  fmt::format("KV reserve: request {} exists", request_id));
  }
  PDSERVE_ASSIGN_OR_RETURN(auto pages, pool_.Allocate(num_pages));
  std::sort(pages.begin(), pages.end());
  TransferSecret secret;
  if (RAND_bytes(secret.data(), static_cast<int>(secret.size())) != 1) {
    return Internal("KV reserve: the random generator failed");
  }
  Request r;
  r.deadline = deadline;
  r.secret = secret;
  r.pages = pages;
  r.filled_pages = filled_pages;
  r.claimed.assign(static_cast<size_t>(layout_.n_layers) * pages.size(), 0);
  requests_.emplace(request_id, std::move(r));
  watchdog_.Schedule(request_id, deadline);
  return Reservation{request_id, std::move(pages), layout_.hash, secret};
}

Status KvReceiver::Wait(uint64_t request_id) {
  std::unique_lock lock(mu_);
  for (;;) {
    auto it = requests_.find(request_id);
    if (it == requests_.end()) {
      return NotFound(fmt::format("KV receiver: unknown request {}", request_id));
    }
    if (it->second.state == TransferState::kDone) return Status::Ok();
    if (it->second.state == TransferState::kFailed) return it->second.status;
    cv_.wait(lock);
  }
}

Result<std::vector<int32_t>> KvReceiver::TakePages(uint64_t request_id) {
  std::lock_guard lock(mu_);
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return NotFound(fmt::format("KV: unknown request {}", request_id));
  if (it->second.state != TransferState::kDone) {
    return FailedPrecondition(fmt::format("KV: request {} is {}, not Done", request_id,
                                          TransferStateName(it->second.state)));
  }
  std::vector<int32_t> pages = std::move(it->second.pages);
  requests_.erase(it);
  return pages;
}

void KvReceiver::Cancel(uint64_t request_id, std::string_view reason) {
  PeerId peer = 0;
  Status why(StatusCode::kCancelled, std::string(reason));
  {
    std::lock_guard lock(mu_);
    auto it = requests_.find(request_id);
    if (it == requests_.end()) return;
    peer = FailLocked(request_id, it->second, why);
  }
  NotifyPeer(peer, request_id, why, false);
}

std::optional<TransferState> KvReceiver::State(uint64_t request_id) const {
  std::lock_guard lock(mu_);
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return std::nullopt;
  return it->second.state;
}

int KvReceiver::requests() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(requests_.size());
}

KvReceiver::PeerId KvReceiver::AddPeer(PeerHooks hooks) {
  std::lock_guard lock(mu_);
  const PeerId id = next_peer_++;
  peers_.emplace(id, std::move(hooks));
  return id;
}

void KvReceiver::RemovePeer(PeerId peer, const Status& why) {
  std::lock_guard lock(mu_);
  peers_.erase(peer);
  std::vector<uint64_t> ids;  // FailLocked may prune the map: no iterating while failing
  for (auto& [id, r] : requests_) {
    if (r.peer == peer) ids.push_back(id);
  }
  for (uint64_t id : ids) {
    if (auto it = requests_.find(id); it != requests_.end()) FailLocked(id, it->second, why);
  }
}

bool KvReceiver::PlausibleChunk(const FrameHeader& h) const {
  if (h.page_count == 0 || h.page_count > static_cast<uint32_t>(pool_.num_pages())) return false;
  const uint64_t expected = h.path == PayloadPath::kTcp ? h.page_count * layout_.page_bytes() : 0;
  return h.byte_count == expected;
}

Result<KvReceiver::ChunkTarget> KvReceiver::BeginChunk(PeerId peer, const FrameHeader& h) {
  if (h.layout_hash != layout_.hash) {
    return FailedPrecondition("KV chunk: another KV layout than this receiver's " +
                              layout_.Shape());
  }
  if (!PlausibleChunk(h)) {
    return InvalidArgument(fmt::format("KV chunk: {} pages in {} bytes over {}", h.page_count,
                                       h.byte_count, PayloadPathName(h.path)));
  }
  if (h.layer >= static_cast<uint32_t>(layout_.n_layers)) {
    return OutOfRange(fmt::format("KV chunk: layer {} of {}", h.layer, layout_.n_layers));
  }
  const int64_t first = h.first_page, count = h.page_count;
  if (first < 0 || first + count > pool_.num_pages()) {
    return OutOfRange(fmt::format("KV chunk: pages {}..{} outside the pool of {}", first,
                                  first + count, pool_.num_pages()));
  }
  std::lock_guard lock(mu_);
  auto it = requests_.find(h.request_id);
  if (it == requests_.end() || !SecretMatches(it->second.secret, h.secret)) {
    return NotFound(kNoSuchReservation);
  }
  Request& r = it->second;
  if (r.peer != 0 && r.peer != peer) {
    return FailedPrecondition(
        fmt::format("KV chunk: request {} belongs to another connection", h.request_id));
  }
  if (r.state == TransferState::kFailed) return r.status;
  if (r.state == TransferState::kDone) {
    return FailedPrecondition(fmt::format("KV chunk: request {} is already Done", h.request_id));
  }
  // Every page must be in the reservation's filled part and not yet covered for this layer.
  // `pages` is ascending and distinct, so [first, first + count) is reserved exactly when it
  // starts at some position and the page count - 1 further on is first + count - 1: a binary
  // search, not a lookup a page, which a large layer's page count makes slow
  // (docs/benchmarks.md, CUDA IPC).
  const size_t n = r.pages.size();
  const auto filled_end = r.pages.begin() + r.filled_pages;
  const auto at = std::lower_bound(r.pages.begin(), filled_end, static_cast<int32_t>(first));
  const auto pos = static_cast<size_t>(at - r.pages.begin());
  if (at == filled_end || *at != first || pos + count > static_cast<size_t>(r.filled_pages) ||
      r.pages[pos + count - 1] != first + count - 1) {
    int64_t missing = first;  // the first page of the run that is not reserved
    while (std::binary_search(r.pages.begin(), filled_end, static_cast<int32_t>(missing))) {
      ++missing;
    }
    return OutOfRange(
        fmt::format("KV chunk: page {} is not reserved for request {}", missing, h.request_id));
  }
  uint8_t* claimed = r.claimed.data() + h.layer * n + pos;
  if (const uint8_t* twice = std::find(claimed, claimed + count, uint8_t{1});
      twice != claimed + count) {
    return Status(StatusCode::kAlreadyExists,
                  fmt::format("KV chunk: layer {} page {} of request {} sent twice", h.layer,
                              first + (twice - claimed), h.request_id));
  }
  std::fill(claimed, claimed + count, uint8_t{1});
  r.peer = peer;
  r.state = TransferState::kReceiving;
  ++r.pins;
  auto* base = static_cast<unsigned char*>(layer_bases_[h.layer]);
  return ChunkTarget{base + static_cast<size_t>(first) * layout_.page_bytes(),
                     static_cast<size_t>(count) * layout_.page_bytes()};
}

Status KvReceiver::EndChunk(PeerId peer, const FrameHeader& h, const Status& applied) {
  Status result;
  {
    std::lock_guard lock(mu_);
    auto it = requests_.find(h.request_id);
    if (it == requests_.end()) return Internal("KV chunk: request vanished while pinned");
    Request& r = it->second;
    --r.pins;
    if (!applied.ok()) {
      FailLocked(h.request_id, r, applied);  // the chunk's nack tells the sender
      result = applied;
    } else if (r.state == TransferState::kFailed) {
      result = r.status;
    } else {
      r.applied_pages += h.page_count;
      if (r.applied_pages == static_cast<int64_t>(layout_.n_layers) * r.filled_pages) {
        r.state = TransferState::kDone;
        watchdog_.Erase(h.request_id);
        cv_.notify_all();
      }
    }
    // A request failed while chunks held it (its deadline, a cancel) kept its pages for their
    // writes; the last of them to end frees them, whatever its own outcome. (FailLocked above
    // frees nothing for a request that was already Failed.)
    if (r.state == TransferState::kFailed && r.pins == 0) FreeLocked(r);
  }
  return result;
}

void KvReceiver::FailFromPeer(PeerId peer, uint64_t request_id, const TransferSecret& secret,
                              const Status& why) {
  std::lock_guard lock(mu_);
  auto it = requests_.find(request_id);
  if (it == requests_.end() || !SecretMatches(it->second.secret, secret)) return;
  if (it->second.peer != 0 && it->second.peer != peer) return;  // not that peer's to cancel
  FailLocked(request_id, it->second, why);
}

KvReceiver::PeerId KvReceiver::FailLocked(uint64_t id, Request& r, const Status& why) {
  if (r.state == TransferState::kDone || r.state == TransferState::kFailed) return 0;
  r.state = TransferState::kFailed;
  r.status = why.ok() ? Internal("failed without a reason") : why;
  if (r.pins == 0) FreeLocked(r);
  watchdog_.Erase(id);
  Retire(id);
  cv_.notify_all();
  spdlog::debug("KV receiver: request {} Failed: {}", id, r.status.ToString());
  return r.peer;
}

void KvReceiver::FreeLocked(Request& r) {
  if (!r.pages.empty() && r.state == TransferState::kFailed &&
      failed_hold_ > Clock::duration::zero()) {
    // A request no chunk reached may have a sender that cannot be told (HoldFailedPages).
    const auto release = r.peer == 0 ? std::max(Clock::now(), r.deadline) + failed_hold_
                                     : Clock::now() + failed_hold_;
    held_pages_ += static_cast<int>(r.pages.size());
    const auto it = held_.emplace(release, std::move(r.pages));
    if (it == held_.begin()) watchdog_.Schedule(kHoldTimer, release);  // the earliest now
  } else if (!r.pages.empty()) {
    pool_.Free(r.pages);
  }
  r.pages.clear();
  r.pages.shrink_to_fit();
  r.claimed.clear();
  r.claimed.shrink_to_fit();
}

void KvReceiver::Retire(uint64_t id) {
  retired_.push_back(id);
  while (retired_.size() > kRetiredKept) {
    auto it = requests_.find(retired_.front());
    // A pinned one keeps its (small, page-less once unpinned) entry until the map is gone.
    if (it != requests_.end() && it->second.pins == 0) requests_.erase(it);
    retired_.pop_front();
  }
}

void KvReceiver::OnDeadline(uint64_t id) {
  if (id == kHoldTimer) {
    std::lock_guard lock(mu_);
    ReleaseHeldLocked(Clock::now());
    return;
  }
  PeerId peer = 0;
  bool stuck = false;
  Status why(StatusCode::kDeadlineExceeded,
             fmt::format("KV transfer of request {} not done by its deadline", id));
  {
    std::lock_guard lock(mu_);
    auto it = requests_.find(id);
    if (it == requests_.end()) return;
    stuck = it->second.pins > 0;
    peer = FailLocked(id, it->second, why);
  }
  NotifyPeer(peer, id, why, stuck);
}

void KvReceiver::NotifyPeer(PeerId peer, uint64_t id, const Status& why, bool abort) {
  if (peer == 0) return;
  PeerHooks hooks;
  {
    std::lock_guard lock(mu_);
    auto it = peers_.find(peer);
    if (it == peers_.end()) return;
    hooks = it->second;
  }
  if (abort && hooks.abort) {
    hooks.abort();
  } else if (hooks.notify_failed) {
    hooks.notify_failed(id, why);
  }
}

}  // namespace pdserve::kv_transfer
