#include "common/gateway_link.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

namespace pdserve {

Status WorkerIdentity::Validate() const {
  if (capacity_class != "reserved" && capacity_class != "burst") {
    return InvalidArgument("capacity class must be reserved or burst, got '" + capacity_class +
                           "'");
  }
  if (!(price_per_gpu_hour >= 0)) return InvalidArgument("price per GPU-hour must be >= 0");
  if (gpu_count < 1) return InvalidArgument("GPU count must be >= 1");
  return Status::Ok();
}

void WorkerIdentity::Fill(proto::Register* r) const {
  r->set_capacity_class(capacity_class);
  r->set_price_per_gpu_hour(price_per_gpu_hour);
  r->set_gpu_count(gpu_count);
  r->set_zone(zone);
  r->set_cluster_token(cluster_token);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  r->set_name(std::string(host) + ":" + std::to_string(::getpid()));
}

Result<std::chrono::steady_clock::time_point> DeadlineFromGateway(double seconds) {
  constexpr double kDefaultSeconds = 30, kMaxSeconds = 24 * 3600;
  if (!(seconds <= kMaxSeconds)) {  // NaN too
    return InvalidArgument("deadline_seconds must be at most a day, got " +
                           std::to_string(seconds));
  }
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(seconds > 0 ? seconds : kDefaultSeconds));
}

Result<std::unique_ptr<GatewayLink>> GatewayLink::Connect(const GatewayLinkOptions& options,
                                                          const proto::Register& hello) {
  if (options.port == 0) return InvalidArgument("the gateway's control port is required");
  auto link = std::unique_ptr<GatewayLink>(new GatewayLink());
  link->keepalive_ = options.keepalive;
  PDSERVE_ASSIGN_OR_RETURN(auto socket,
                           DialTcp(link->io_, options.host, options.port, options.connect_timeout));
  link->conn_ = FramedConnection::Create(std::move(socket));
  GatewayLink* self = link.get();
  link->conn_->Start([self](proto::Envelope&& m) { self->OnMessage(std::move(m)); },
                     [self](const Status& why) { self->OnClose(why); });
  proto::Envelope m;
  *m.mutable_register_() = hello;
  link->Send(m);
  link->ArmKeepalive();
  link->network_ = std::thread([self] {
    auto guard = boost::asio::make_work_guard(self->io_);
    self->io_.run();
  });
  return link;
}

GatewayLink::~GatewayLink() {
  io_.stop();
  if (network_.joinable()) network_.join();
}

void GatewayLink::Send(const proto::Envelope& message) {
  std::lock_guard lock(send_mu_);
  last_send_ = std::chrono::steady_clock::now();
  if (message.has_load()) last_load_ = message;
  conn_->Send(message);
}

void GatewayLink::ArmKeepalive() {
  if (keepalive_.count() <= 0) return;
  keepalive_timer_.expires_after(keepalive_);
  keepalive_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: the link is going away
    {
      std::lock_guard lock(send_mu_);
      const auto now = std::chrono::steady_clock::now();
      if (last_load_ && now - last_send_ >= keepalive_) {
        last_send_ = now;
        conn_->Send(*last_load_);
      }
    }
    ArmKeepalive();
  });
}

void GatewayLink::OnMessage(proto::Envelope&& message) {
  if (message.has_register_reply()) {
    const proto::RegisterReply& reply = message.register_reply();
    if (!reply.accepted()) {
      spdlog::error("gateway refused registration: {}", reply.error());
      conn_->Close(FailedPrecondition("registration refused: " + reply.error()));
      return;
    }
    worker_id_ = reply.worker_id();
    registered_ = true;
    spdlog::info("registered with the gateway as worker {}", reply.worker_id());
    return;
  }
  std::lock_guard lock(mu_);
  inbox_.push_back(std::move(message));
  cv_.notify_all();
}

void GatewayLink::OnClose(const Status& why) {
  std::lock_guard lock(mu_);
  lost_ = true;
  lost_status_ = why.ok() ? Unavailable("the gateway closed the connection") : why;
  cv_.notify_all();
}

bool GatewayLink::WaitForMessages(std::deque<proto::Envelope>* out,
                                  std::chrono::steady_clock::time_point until) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, until, [&] { return !inbox_.empty() || woken_ || lost_; });
  woken_ = false;
  for (auto& m : inbox_) out->push_back(std::move(m));
  inbox_.clear();
  return !lost_ || !out->empty();
}

void GatewayLink::Wake() {
  std::lock_guard lock(mu_);
  woken_ = true;
  cv_.notify_all();
}

Status GatewayLink::LostStatus() const {
  std::lock_guard lock(mu_);
  return lost_ ? lost_status_ : Status::Ok();
}

void GatewayLink::CloseAfterFlush(std::chrono::milliseconds timeout) {
  conn_->CloseAfterFlush(Status::Ok());
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return lost_; });
}

}  // namespace pdserve
