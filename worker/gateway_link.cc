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

std::vector<GatewayAddress> GatewayLink::Addresses(const GatewayLinkOptions& options) {
  std::vector<GatewayAddress> named{{options.host, options.port}};
  named.insert(named.end(), options.more_gateways.begin(), options.more_gateways.end());
  if (!options.every_address) return named;
  std::vector<GatewayAddress> out;
  boost::asio::io_context io;
  boost::asio::ip::tcp::resolver resolver(io);
  for (const GatewayAddress& g : named) {
    boost::system::error_code ec;
    const auto endpoints = resolver.resolve(g.host, std::to_string(g.port), ec);
    size_t added = 0;
    for (const auto& e : endpoints) {
      GatewayAddress a{e.endpoint().address().to_string(), g.port};
      const bool seen = std::any_of(out.begin(), out.end(), [&](const GatewayAddress& o) {
        return o.host == a.host && o.port == a.port;
      });
      if (!seen) out.push_back(a), ++added;
    }
    if (added == 0) out.push_back(g);  // not resolving yet: dialled by its name, again later
  }
  return out;
}

Result<std::unique_ptr<GatewayLink>> GatewayLink::Connect(const GatewayLinkOptions& options,
                                                          const proto::Register& hello) {
  if (options.port == 0) return InvalidArgument("the gateway's control port is required");
  for (const GatewayAddress& g : options.more_gateways) {
    if (g.port == 0) return InvalidArgument("gateway " + g.host + ": a control port is required");
  }
  auto link = std::unique_ptr<GatewayLink>(new GatewayLink());
  link->options_ = options;
  link->hello_ = hello;
  for (const GatewayAddress& g : Addresses(options)) link->peers_.push_back({.address = g});
  // Several gateways: each is dialled for at most a few seconds here; one that does not answer
  // is dialled again in the background, once another has.
  const auto timeout = link->peers_.size() == 1
                           ? options.connect_timeout
                           : std::min(options.connect_timeout, std::chrono::milliseconds(3000));
  Status first_error;
  size_t attached = 0;
  for (size_t i = 0; i < link->peers_.size(); ++i) {
    const GatewayAddress& g = link->peers_[i].address;
    auto socket = DialTcp(link->io_, g.host, g.port, timeout);
    if (!socket.ok()) {
      if (first_error.ok()) first_error = socket.status();
      link->peers_[i].next_dial = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      continue;
    }
    link->Attach(i, std::move(*socket));
    ++attached;
  }
  if (attached == 0) return first_error;
  link->last_tick_ = std::chrono::steady_clock::now();
  link->MarkProgress();
  link->ArmTick();
  GatewayLink* self = link.get();
  link->network_ = std::thread([self] {
    auto guard = boost::asio::make_work_guard(self->io_);
    self->io_.run();
  });
  if (link->peers_.size() > 1) link->dialer_ = std::thread([self] { self->RunDialer(); });
  return link;
}

GatewayLink::~GatewayLink() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (dialer_.joinable()) dialer_.join();
  io_.stop();
  if (network_.joinable()) network_.join();
}

std::string GatewayLink::Label(size_t peer) const {
  return peers_[peer].address.host + ":" + std::to_string(peers_[peer].address.port);
}

void GatewayLink::Attach(size_t peer, boost::asio::ip::tcp::socket socket) {
  auto conn = FramedConnection::Create(std::move(socket));
  FramedConnection* raw = conn.get();  // its handlers run while it is alive
  // Under send_mu_: the gateway's answer, however quick, finds this connection the peer's (its
  // handler waits for the lock), and the Register goes first, before another thread's Send.
  std::lock_guard lock(send_mu_);
  conn->Start([this, peer, raw](proto::Envelope&& m) { OnMessage(peer, raw, std::move(m)); },
              [this, peer, raw](const Status& why) { OnClose(peer, raw, why); });
  proto::Envelope m;
  *m.mutable_register_() = hello_;
  conn->Send(m);
  Peer& p = peers_[peer];
  p.conn = std::move(conn);
  p.up = true;
  p.registered = false;
  p.worker_id = 0;
  p.last_load.reset();
  p.last_send = p.last_heard = std::chrono::steady_clock::now();
}

void GatewayLink::RunDialer() {
  using Clock = std::chrono::steady_clock;
  const auto lost_or_stopping = [&] {
    std::lock_guard lock(mu_);
    return stopping_ || lost_;
  };
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stopping_; });
      if (stopping_) return;
      if (lost_) continue;  // every gateway lost: Reconnect, on the engine thread
    }
    std::vector<size_t> due;
    {
      std::lock_guard send_lock(send_mu_);
      for (size_t i = 0; i < peers_.size(); ++i) {
        if (!peers_[i].up && !peers_[i].refused && Clock::now() >= peers_[i].next_dial) {
          due.push_back(i);
        }
      }
    }
    for (size_t i : due) {
      auto socket = DialTcp(io_, peers_[i].address.host, peers_[i].address.port,
                            std::chrono::milliseconds(1000));
      std::lock_guard dial_lock(dial_mu_);  // not with Reconnect's attach
      if (!socket.ok() || lost_or_stopping()) {
        std::lock_guard send_lock(send_mu_);
        peers_[i].next_dial = Clock::now() + std::chrono::seconds(1);
        continue;
      }
      Attach(i, std::move(*socket));
      spdlog::info("gateway {}: connected again, registering", Label(i));
    }
  }
}

Status GatewayLink::Reconnect(std::chrono::steady_clock::time_point give_up,
                              const std::function<bool()>& stop) {
  Status lost = LostStatus();
  if (lost.ok()) return Status::Ok();  // not lost: nothing to do
  using Clock = std::chrono::steady_clock;
  while (!stop() && Clock::now() < give_up) {
    bool any = false;
    for (size_t i = 0; i < peers_.size(); ++i) {
      {
        std::lock_guard send_lock(send_mu_);
        if (peers_[i].refused) continue;
      }
      any = true;
      const auto turn_end =
          std::min<Clock::time_point>(Clock::now() + std::chrono::seconds(1), give_up);
      auto socket =
          DialTcp(io_, peers_[i].address.host, peers_[i].address.port,
                  std::chrono::duration_cast<std::chrono::milliseconds>(turn_end - Clock::now()));
      if (!socket.ok()) {
        if (peers_.size() == 1) std::this_thread::sleep_until(turn_end);  // a name that fails
        continue;                                                         // fails at once
      }
      std::lock_guard dial_lock(dial_mu_);  // not with the dialer's attach
      {
        // Before the new connection starts: its own loss, however soon, must not be undone here.
        std::lock_guard send_lock(send_mu_);
        owners_.clear();  // the lost gateways' requests were abandoned
        std::lock_guard lock(mu_);
        inbox_.clear();
        woken_ = false;
        lost_ = false;
        lost_status_ = Status::Ok();
      }
      Attach(i, std::move(*socket));
      spdlog::info("gateway {}: connected again, registering", Label(i));
      return Status::Ok();
    }
    if (!any) return lost;  // every gateway refused this worker
    if (peers_.size() > 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return lost;
}

void GatewayLink::Send(const proto::Envelope& message) {
  if (holder_.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
    held_.push_back(message);
    return;
  }
  std::lock_guard lock(send_mu_);
  std::vector<std::vector<proto::Envelope>> batches(peers_.size());
  Route(message, &batches);
  SendBatches(batches);
}

void GatewayLink::Route(const proto::Envelope& m,
                        std::vector<std::vector<proto::Envelope>>* batches) {
  uint64_t request_id = 0;
  bool about_a_request = true;
  if (m.has_tokens()) {
    request_id = m.tokens().request_id();
  } else if (m.has_reserved()) {
    request_id = m.reserved().request_id();
  } else if (m.has_error()) {
    request_id = m.error().request_id();
  } else {
    about_a_request = false;
  }
  if (!about_a_request || peers_.size() == 1) {
    for (size_t i = 0; i < peers_.size(); ++i) (*batches)[i].push_back(m);
    return;
  }
  auto it = owners_.find(request_id);
  if (it == owners_.end()) return;  // its gateway was lost: the request was cancelled
  (*batches)[it->second.peer].push_back(m);
  // The request's end: forget which gateway sent it.
  Owner& o = it->second;
  if (m.has_error() || (m.has_tokens() && o.open < 0)) {
    owners_.erase(it);
  } else if (m.has_tokens() && !m.tokens().finish_reason().empty() && --o.open <= 0) {
    owners_.erase(it);
  }
}

void GatewayLink::SendBatches(std::vector<std::vector<proto::Envelope>>& batches) {
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < peers_.size(); ++i) {
    if (batches[i].empty()) continue;
    Peer& p = peers_[i];
    for (auto it = batches[i].rbegin(); it != batches[i].rend(); ++it) {
      if (it->has_load()) {
        p.last_load = *it;
        break;
      }
    }
    if (!p.up) continue;  // dropped while that gateway is lost
    p.last_send = now;
    if (batches[i].size() == 1) {
      p.conn->Send(batches[i][0]);
    } else {
      p.conn->SendAll(batches[i]);
    }
  }
}

void GatewayLink::HoldSends() { holder_ = std::this_thread::get_id(); }

void GatewayLink::FlushSends() {
  if (held_.empty()) return;
  std::lock_guard lock(send_mu_);
  std::vector<std::vector<proto::Envelope>> batches(peers_.size());
  for (const proto::Envelope& m : held_) Route(m, &batches);
  SendBatches(batches);
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
    // pause): messages the gateways sent meanwhile are still unread, so the silence restarts.
    const bool paused = now - last_tick_ > 2 * period + std::chrono::milliseconds(500);
    last_tick_ = now;
    std::vector<std::pair<size_t, std::shared_ptr<FramedConnection>>> silent;
    {
      std::lock_guard lock(send_mu_);
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
      for (size_t i = 0; i < peers_.size(); ++i) {
        Peer& p = peers_[i];
        if (!p.up) continue;
        if (paused) p.last_heard = now;
        if (options_.keepalive.count() > 0 && p.last_load && !stalled &&
            now - p.last_send >= options_.keepalive) {
          p.last_send = now;
          p.conn->Send(*p.last_load);
        }
        if (options_.silence_timeout.count() > 0 && now - p.last_heard > options_.silence_timeout) {
          p.last_heard = now;  // one close per silence
          silent.emplace_back(i, p.conn);
        }
      }
    }
    for (auto& [i, conn] : silent) {
      spdlog::warn("gateway {} sent nothing for {} ms; treating it as lost", Label(i),
                   options_.silence_timeout.count());
      conn->Close(DeadlineExceeded("the gateway sent nothing for " +
                                   std::to_string(options_.silence_timeout.count()) + " ms"));
    }
    ArmTick();
  });
}

void GatewayLink::OnMessage(size_t peer, FramedConnection* conn, proto::Envelope&& message) {
  std::string refusal;
  {
    std::lock_guard lock(send_mu_);
    Peer& p = peers_[peer];
    if (conn != p.conn.get() || !p.up) return;  // a connection already given up on
    p.last_heard = std::chrono::steady_clock::now();
    if (message.has_heartbeat()) return;  // the link's own business
    if (message.has_register_reply()) {
      const proto::RegisterReply& reply = message.register_reply();
      if (!reply.accepted()) {
        spdlog::error("gateway {} refused registration: {}", Label(peer), reply.error());
        p.refused = true;
        refusal = reply.error();
      } else {
        p.worker_id = reply.worker_id();
        p.registered = true;
        if (peers_.size() == 1) {
          spdlog::info("registered with the gateway as worker {}", reply.worker_id());
        } else {
          spdlog::info("registered with gateway {} as worker {}", Label(peer), reply.worker_id());
        }
      }
    } else if (peers_.size() == 1) {
      // One gateway: every answer goes to it, no request's sender to remember.
    } else if (message.has_generate()) {  // which gateway each request came from, for its answers
      owners_[message.generate().request_id()] = {peer,
                                                  std::max(1, message.generate().sampling().n())};
    } else if (message.has_reserve()) {
      owners_[message.reserve().request_id()] = {peer, 1};
    } else if (message.has_prefill()) {
      owners_[message.prefill().request_id()] = {peer, -1};
    }
  }
  if (message.has_register_reply()) {
    // Closed outside send_mu_: the connection's close handler takes it.
    if (!message.register_reply().accepted()) {
      conn->Close(FailedPrecondition("registration refused: " + refusal));
    }
    return;
  }
  std::lock_guard lock(mu_);
  inbox_.push_back(std::move(message));
  cv_.notify_all();
}

void GatewayLink::OnClose(size_t peer, FramedConnection* conn, const Status& why) {
  const Status reason = why.ok() ? Unavailable("the gateway closed the connection") : why;
  std::vector<uint64_t> orphans;
  bool any_up = false;
  {
    std::lock_guard lock(send_mu_);
    Peer& p = peers_[peer];
    if (conn != p.conn.get() || !p.up) return;  // a connection already given up on
    p.up = false;
    p.registered = false;
    p.next_dial = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (const Peer& other : peers_) any_up = any_up || other.up;
    if (any_up) {
      for (auto it = owners_.begin(); it != owners_.end();) {
        if (it->second.peer == peer) {
          orphans.push_back(it->first);
          it = owners_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  std::lock_guard lock(mu_);
  if (!any_up) {
    lost_ = true;
    lost_status_ = reason;
  } else {
    spdlog::warn(
        "gateway {} lost ({}); cancelling its {} request(s) here and dialling it again "
        "while serving the others",
        Label(peer), reason.ToString(), orphans.size());
    for (uint64_t id : orphans) {
      proto::Envelope cancel;
      cancel.mutable_cancel()->set_request_id(id);
      inbox_.push_back(std::move(cancel));
    }
  }
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

bool GatewayLink::registered() const {
  std::lock_guard lock(send_mu_);
  return std::any_of(peers_.begin(), peers_.end(), [](const Peer& p) { return p.registered; });
}

uint64_t GatewayLink::worker_id() const {
  std::lock_guard lock(send_mu_);
  for (const Peer& p : peers_) {
    if (p.registered) return p.worker_id;
  }
  return 0;
}

size_t GatewayLink::connected() const {
  std::lock_guard lock(send_mu_);
  return std::count_if(peers_.begin(), peers_.end(), [](const Peer& p) { return p.up; });
}

void GatewayLink::CloseAfterFlush(std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock(send_mu_);
    for (Peer& p : peers_) {
      if (p.up) p.conn->CloseAfterFlush(Status::Ok());
    }
  }
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return lost_; });
}

}  // namespace pdserve::worker
