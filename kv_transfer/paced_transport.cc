#include "kv_transfer/paced_transport.h"

#include <algorithm>
#include <thread>

namespace pdserve::kv_transfer {

PacedTransport::PacedTransport(std::unique_ptr<Transport> inner, PacedLink link)
    : inner_(std::move(inner)), link_(link) {}

Status PacedTransport::Open(const OutgoingRequest& request) {
  PDSERVE_RETURN_IF_ERROR(inner_->Open(request));
  std::lock_guard lock(mu_);
  requests_[request.request_id] = {request.src_pages.size(), request.deadline, Clock::now()};
  return Status::Ok();
}

Status PacedTransport::PushLayer(uint64_t request_id, int layer) {
  PDSERVE_RETURN_IF_ERROR(inner_->PushLayer(request_id, layer));
  if (link_.bytes_per_second <= 0) return Status::Ok();
  std::lock_guard lock(mu_);
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return Status::Ok();
  const double seconds = it->second.pages * link_.bytes_per_page_layer / link_.bytes_per_second;
  link_free_at_ =
      std::max(link_free_at_, Clock::now()) +
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  it->second.done_at = link_free_at_;
  return Status::Ok();
}

Status PacedTransport::Wait(uint64_t request_id) {
  Status s = inner_->Wait(request_id);
  Paced paced;
  {
    std::lock_guard lock(mu_);
    auto it = requests_.find(request_id);
    if (it == requests_.end()) return s;
    paced = it->second;
    requests_.erase(it);
  }
  if (!s.ok()) return s;
  if (paced.done_at > paced.deadline) {
    std::this_thread::sleep_until(paced.deadline);
    return DeadlineExceeded(
        "the KV transfer would not finish within its deadline at the "
        "profile's bandwidth");
  }
  std::this_thread::sleep_until(paced.done_at);
  return Status::Ok();
}

void PacedTransport::Cancel(uint64_t request_id, std::string_view reason) {
  inner_->Cancel(request_id, reason);
}

}  // namespace pdserve::kv_transfer
