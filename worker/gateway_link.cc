#include "worker/gateway_link.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace pdserve::worker {

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
  link->options_ = options;
  link->hello_ = hello;
  PDSERVE_ASSIGN_OR_RETURN(auto socket,
                           DialTcp(link->io_, options.host, options.port, options.connect_timeout));
  link->Attach(std::move(socket));
  link->last_tick_ = std::chrono::steady_clock::now();
  link->MarkProgress();
  link->ArmTick();
  GatewayLink* self = link.get();
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

void GatewayLink::Attach(boost::asio::ip::tcp::socket socket) {
  auto conn = FramedConnection::Create(std::move(socket));
  FramedConnection* raw = conn.get();  // its handlers run while it is alive
  conn->Start([this, raw](proto::Envelope&& m) { OnMessage(raw, std::move(m)); },
              [this](const Status& why) { OnClose(why); });
  proto::Envelope m;
  *m.mutable_register_() = hello_;
  conn->Send(m);  // first, before another thread's Send can reach the new connection
  std::lock_guard lock(send_mu_);
  conn_ = std::move(conn);
  last_load_.reset();
  last_send_ = last_heard_ = std::chrono::steady_clock::now();
}

Status GatewayLink::Reconnect(std::chrono::steady_clock::time_point give_up,
                              const std::function<bool()>& stop) {
  Status lost = LostStatus();
  if (lost.ok()) return Status::Ok();  // not lost: nothing to do
  if (refused_) return lost;
  using Clock = std::chrono::steady_clock;
  while (!stop() && Clock::now() < give_up) {
    const auto turn_end =
        std::min<Clock::time_point>(Clock::now() + std::chrono::seconds(1), give_up);
    auto socket =
        DialTcp(io_, options_.host, options_.port,
                std::chrono::duration_cast<std::chrono::milliseconds>(turn_end - Clock::now()));
    if (!socket.ok()) {
      std::this_thread::sleep_until(turn_end);  // a name that does not resolve fails at once
      continue;
    }
    {
      // Before the new connection starts: its own loss, however soon, must not be undone here.
      std::lock_guard lock(mu_);
      inbox_.clear();
      woken_ = false;
      lost_ = false;
      lost_status_ = Status::Ok();
    }
    registered_ = false;
    worker_id_ = 0;
    Attach(std::move(*socket));
    spdlog::info("gateway {}:{}: connected again, registering", options_.host, options_.port);
    return Status::Ok();
  }
  return lost;
}

void GatewayLink::Send(const proto::Envelope& message) {
  if (holder_.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
    held_.push_back(message);
    return;
  }
  std::lock_guard lock(send_mu_);
  last_send_ = std::chrono::steady_clock::now();
  if (message.has_load()) last_load_ = message;
  conn_->Send(message);
}

void GatewayLink::HoldSends() { holder_ = std::this_thread::get_id(); }

void GatewayLink::FlushSends() {
  if (held_.empty()) return;
  std::lock_guard lock(send_mu_);
  last_send_ = std::chrono::steady_clock::now();
  for (auto it = held_.rbegin(); it != held_.rend(); ++it) {
    if (it->has_load()) {
      last_load_ = *it;
      break;
    }
  }
  conn_->SendAll(held_);
  held_.clear();
}

void GatewayLink::ReleaseSends() {
  FlushSends();
  holder_ = std::thread::id();
}

std::chrono::milliseconds GatewayLink::TickPeriod() const {
  std::chrono::milliseconds period{1000};
  if (options_.keepalive.count() > 0) period = std::min(period, options_.keepalive);
  if (options_.silence_timeout.count() > 0) {
    period =
        std::min(period, std::max(std::chrono::milliseconds(10), options_.silence_timeout / 4));
  }
  return period;
}

void GatewayLink::ArmTick() {
  const auto period = TickPeriod();
  tick_timer_.expires_after(period);
  tick_timer_.async_wait([this, period](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: the link is going away
    const auto now = std::chrono::steady_clock::now();
    // A tick far later than its period means this process was not running (stopped, a VM
    // pause): messages the gateway sent meanwhile are still unread, so the silence restarts.
    const bool paused = now - last_tick_ > 2 * period + std::chrono::milliseconds(500);
    last_tick_ = now;
    std::shared_ptr<FramedConnection> silent;
    {
      std::lock_guard lock(send_mu_);
      if (paused) last_heard_ = now;
      const auto progress = std::chrono::steady_clock::time_point(
          std::chrono::steady_clock::duration(last_progress_));
      const bool stalled =
          options_.stall_timeout.count() > 0 && now - progress > options_.stall_timeout;
      if (stalled && !stall_logged_) {
        spdlog::error(
            "the engine thread has not turned for {} ms; no more keepalives, so that "
            "the gateway takes this worker for lost",
            options_.stall_timeout.count());
      }
      stall_logged_ = stalled;
      if (options_.keepalive.count() > 0 && last_load_ && !stalled &&
          now - last_send_ >= options_.keepalive) {
        last_send_ = now;
        conn_->Send(*last_load_);
      }
      if (options_.silence_timeout.count() > 0 && now - last_heard_ > options_.silence_timeout) {
        last_heard_ = now;  // one close per silence
        silent = conn_;
      }
    }
    if (silent && LostStatus().ok()) {
      spdlog::warn("gateway {}:{} sent nothing for {} ms; treating it as lost", options_.host,
                   options_.port, options_.silence_timeout.count());
      silent->Close(DeadlineExceeded("the gateway sent nothing for " +
                                     std::to_string(options_.silence_timeout.count()) + " ms"));
    }
    ArmTick();
  });
}

void GatewayLink::OnMessage(FramedConnection* conn, proto::Envelope&& message) {
  {
    std::lock_guard lock(send_mu_);
    if (conn == conn_.get()) last_heard_ = std::chrono::steady_clock::now();
  }
  if (message.has_heartbeat()) return;  // the link's own business
  if (message.has_register_reply()) {
    const proto::RegisterReply& reply = message.register_reply();
    if (!reply.accepted()) {
      spdlog::error("gateway refused registration: {}", reply.error());
      refused_ = true;
      conn->Close(FailedPrecondition("registration refused: " + reply.error()));
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

void GatewayLink::MarkProgress() {
  last_progress_ = std::chrono::steady_clock::now().time_since_epoch().count();
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
  {
    std::lock_guard lock(send_mu_);
    conn_->CloseAfterFlush(Status::Ok());
  }
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return lost_; });
}

}  // namespace pdserve::worker
