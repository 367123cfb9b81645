#include "kv_transfer/outgoing_transfers.h"

#include <spdlog/spdlog.h>

#include <fmt/format.h>

namespace pdserve::kv_transfer {

OutgoingTransfers::OutgoingTransfers(int n_layers, int num_pages, LocalFailureFn on_local_failure)
    : n_layers_(n_layers),
      num_pages_(num_pages),
      on_local_failure_(std::move(on_local_failure)),
      watchdog_([this](uint64_t id) { OnDeadline(id); }) {}

OutgoingTransfers::~OutgoingTransfers() = default;

Status OutgoingTransfers::Open(const OutgoingRequest& req) {
  if (req.src_pages.empty()) return InvalidArgument("KV send: a request needs pages");
  for (int32_t p : req.src_pages) {
    if (p < 0 || p >= num_pages_) {
      return OutOfRange(
          fmt::format("KV send: source page {} outside the pool of {}", p, num_pages_));
    }
  }
  if (req.deadline <= Clock::now())
    return Status(StatusCode::kDeadlineExceeded, "KV send: past deadline");
  PDSERVE_ASSIGN_OR_RETURN(auto runs, CoalesceRuns(req.src_pages, req.dst_pages));
  std::lock_guard lock(mu_);
  if (!lost_.ok()) return lost_;
  if (requests_.count(req.request_id)) {
    return Status(StatusCode::kAlreadyExists,
                  fmt::format("KV send: request {} is open", req.request_id));
  }
  Request r;
  r.runs = std::move(runs);
  r.pushed.assign(n_layers_, 0);
  r.secret = req.secret;
  requests_.emplace(req.request_id, std::move(r));
  watchdog_.Schedule(req.request_id, req.deadline);
  return Status::Ok();
}

Result<std::vector<PageRun>> OutgoingTransfers::BeginLayer(uint64_t id, int layer,
                                                           int32_t max_chunk_pages,
                                                           int32_t lead_chunk_pages) {
  std::lock_guard lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end()) return NotFound(fmt::format("KV send: unknown request {}", id));
  Request& r = it->second;
  if (r.state == TransferState::kFailed) return r.status;
  if (layer < 0 || layer >= n_layers_) {
    return OutOfRange(fmt::format("KV send: layer {} of {}", layer, n_layers_));
  }
  if (r.pushed[layer]) {
    return Status(StatusCode::kAlreadyExists, fmt::format("KV send: layer {} pushed twice", layer));
  }
  r.pushed[layer] = 1;
  ++r.layers_pushed;
  r.state = TransferState::kReceiving;
  std::vector<PageRun> chunks = SplitRuns(r.runs, max_chunk_pages, lead_chunk_pages);
  for (const PageRun& c : chunks) r.unacked.emplace(layer, c.dst_first);
  return chunks;
}

void OutgoingTransfers::OnAck(uint64_t id, uint32_t layer, int32_t dst_first,
                              const Status& status) {
  std::lock_guard lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end()) return;  // forgotten after Wait, or a peer's confusion
  Request& r = it->second;
  auto chunk = r.unacked.find({layer, dst_first});
  if (chunk == r.unacked.end()) {
    if (r.state != TransferState::kFailed) {
      spdlog::warn("KV send: ack for no outstanding chunk (request {} layer {} page {})", id, layer,
                   dst_first);
    }
    return;
  }
  r.unacked.erase(chunk);
  if (!status.ok()) {
    FailLocked(id, r, status.WithContext("KV receiver refused a chunk"));
    return;
  }
  if (r.state == TransferState::kReceiving && r.layers_pushed == n_layers_ && r.unacked.empty()) {
    r.state = TransferState::kDone;
    watchdog_.Erase(id);
    cv_.notify_all();
  }
}

void OutgoingTransfers::FailFromPeer(uint64_t id, const Status& why) {
  std::lock_guard lock(mu_);
  if (auto it = requests_.find(id); it != requests_.end()) FailLocked(id, it->second, why);
}

void OutgoingTransfers::FailAll(const Status& why) {
  std::lock_guard lock(mu_);
  if (lost_.ok()) lost_ = why;
  for (auto& [id, r] : requests_) FailLocked(id, r, why);
}

Status OutgoingTransfers::Wait(uint64_t id) {
  std::unique_lock lock(mu_);
  for (;;) {
    auto it = requests_.find(id);
    if (it == requests_.end()) return NotFound(fmt::format("KV send: unknown request {}", id));
    const TransferState s = it->second.state;
    if (s == TransferState::kDone || s == TransferState::kFailed) {
      Status result = s == TransferState::kDone ? Status::Ok() : it->second.status;
      watchdog_.Erase(id);
      requests_.erase(it);
      return result;
    }
    cv_.wait(lock);
  }
}

void OutgoingTransfers::Cancel(uint64_t id, const Status& why) {
  bool failed = false;
  {
    std::lock_guard lock(mu_);
    if (auto it = requests_.find(id); it != requests_.end())
      failed = FailLocked(id, it->second, why);
  }
  if (failed && on_local_failure_) on_local_failure_(id, why);
}

TransferSecret OutgoingTransfers::Secret(uint64_t id) const {
  std::lock_guard lock(mu_);
  auto it = requests_.find(id);
  return it == requests_.end() ? TransferSecret{} : it->second.secret;
}

std::optional<TransferState> OutgoingTransfers::State(uint64_t id) const {
  std::lock_guard lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end()) return std::nullopt;
  return it->second.state;
}

bool OutgoingTransfers::Live(uint64_t id) const {
  std::lock_guard lock(mu_);
  auto it = requests_.find(id);
  return it != requests_.end() && it->second.state != TransferState::kFailed;
}

bool OutgoingTransfers::FailLocked(uint64_t id, Request& r, const Status& why) {
  if (r.state == TransferState::kDone || r.state == TransferState::kFailed) return false;
  r.state = TransferState::kFailed;
  r.status = why.ok() ? Internal("failed without a reason") : why;
  watchdog_.Erase(id);
  cv_.notify_all();
  spdlog::debug("KV send: request {} Failed: {}", id, r.status.ToString());
  return true;
}

void OutgoingTransfers::OnDeadline(uint64_t id) {
  Cancel(id, Status(StatusCode::kDeadlineExceeded,
                    fmt::format("KV transfer of request {} not acknowledged by its deadline", id)));
}

}  // namespace pdserve::kv_transfer
