// WorkerRegistry's membership (router/worker_registry.h): accepting control connections,
// checking each Register, a worker's Loads and StepReports, heartbeats both ways, and a worker
// leaving, with its attempts failed over. Relaying attempts is in worker_registry_relay.cc.
#include "router/worker_registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "common/capacity_class.h"
#include "router/routers.h"

namespace pdserve::router {

namespace asio = boost::asio;
using asio::ip::tcp;

WorkerRegistry::WorkerRegistry(asio::io_context& io, RegistryOptions options)
    : io_(io),
      options_(std::move(options)),
      acceptor_(io),
      sweep_timer_(io),
      accept_backoff_(io.get_executor(), "the worker control listener") {
  if (!options_.router) options_.router = router::MakeDefaultRouter();
}

Status WorkerRegistry::Listen(const std::string& host, uint16_t port) {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) return InvalidArgument("bad control address '" + host + "'");
  tcp::endpoint endpoint(address, port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Unavailable("cannot listen for workers on " + host + ":" + std::to_string(port) + ": " +
                       ec.message());
  port_ = acceptor_.local_endpoint().port();
  last_sweep_ = last_heartbeat_ = std::chrono::steady_clock::now();
  Accept();
  SweepHeartbeats();
  return Status::Ok();
}

void WorkerRegistry::Stop() {
  asio::post(io_, [self = shared_from_this()] {
    boost::system::error_code ignored;
    self->acceptor_.close(ignored);
    self->sweep_timer_.cancel();
    std::vector<std::shared_ptr<FramedConnection>> conns;
    {
      std::lock_guard lock(self->mu_);
      for (auto& [id, w] : self->workers_) conns.push_back(w.conn);
    }
    for (auto& c : conns) c->Close(Unavailable("gateway stopping"));
  });
}

void WorkerRegistry::Accept() {
  acceptor_.async_accept(
      [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
        if (ec == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
        if (!ec) self->Admit(std::move(socket));
        self->accept_backoff_.Next(ec, [self] { self->Accept(); });
      });
}

void WorkerRegistry::Admit(tcp::socket socket) {
  boost::system::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  const std::string address = ec ? "unknown" : peer.address().to_string();
  uint64_t id;
  auto conn = FramedConnection::Create(std::move(socket), options_.unregistered_frame_bytes);
  {
    std::lock_guard lock(mu_);
    int pending = 0;
    for (const auto& [other, w] : workers_) pending += !w.registered && w.address == address;
    if (pending >= options_.max_unregistered_per_address) {
      spdlog::warn(
          "refused a control connection from {}: {} of its connections have not "
          "registered yet",
          address, pending);
      conn->Close(ResourceExhausted("too many unregistered connections"));
      return;
    }
    id = next_id_++;
    Worker& w = workers_[id];
    w.id = id;
    w.conn = conn;
    w.address = address;
    w.last_seen = std::chrono::steady_clock::now();
  }
  std::weak_ptr<WorkerRegistry> weak = shared_from_this();
  conn->Start(
      [weak, id](proto::Envelope&& m) {
        if (auto s = weak.lock()) s->OnMessage(id, std::move(m));
      },
      [weak, id](const Status& why) {
        if (auto s = weak.lock()) s->OnClose(id, why);
      });
}

void WorkerRegistry::Actions::Run() {
  // Calls first: they only post to the sinks' strands, and a sink must see the prefill worker's
  // first token before the decode worker, once sent KvDone, can answer with the second.
  for (auto& call : calls) call();
  for (auto& [conn, m] : sends) conn->Send(m);
}

Status CheckRegister(const proto::Register& r, const RegistryOptions& options) {
  if (!options.cluster_token.empty() && r.cluster_token() != options.cluster_token) {
    return FailedPrecondition("wrong cluster token");
  }
  if (r.model_id() != options.model_id) {
    return FailedPrecondition("gateway serves model '" + options.model_id + "', worker has '" +
                              r.model_id() + "'");
  }
  if (r.role() != "both" && r.role() != "prefill" && r.role() != "decode") {
    return InvalidArgument("unknown role '" + r.role() + "' (prefill, decode or both)");
  }
  if (r.role() == "decode" && (r.kv_endpoint().empty() || r.layout_hash() == 0)) {
    return InvalidArgument("a decode worker must register its KV endpoint and layout hash");
  }
  if (r.role() == "prefill" && r.layout_hash() == 0) {
    return InvalidArgument("a prefill worker must register its KV layout hash");
  }
  if (auto capacity_class = ParseWorkerCapacityClass(r.capacity_class()); !capacity_class.ok()) {
    return capacity_class.status();
  }
  if (!(r.price_per_gpu_hour() >= 0) || !std::isfinite(r.price_per_gpu_hour()) ||
      r.gpu_count() < 1) {
    return InvalidArgument("price per GPU-hour must be a finite number >= 0 and GPU count >= 1");
  }
  if (r.kv_pages() < 1 || r.page_size() < 1 || r.max_context() < 0) {
    return InvalidArgument("KV pages and page size must be >= 1, and max context >= 0; got " +
                           std::to_string(r.kv_pages()) + ", " + std::to_string(r.page_size()) +
                           " and " + std::to_string(r.max_context()));
  }
  return Status::Ok();
}

void WorkerRegistry::OnMessage(uint64_t conn_id, proto::Envelope&& m) {
  Actions actions;
  std::shared_ptr<FramedConnection> conn;
  std::string refusal;
  bool accepted = false;
  bool capacity_changed = false;
  {
    std::lock_guard lock(mu_);
    auto it = workers_.find(conn_id);
    if (it == workers_.end()) return;
    Worker& w = it->second;
    w.last_seen = std::chrono::steady_clock::now();
    conn = w.conn;
    if (!w.registered) {
      const Status checked = m.has_register_()
                                 ? CheckRegister(m.register_(), options_)
                                 : InvalidArgument("the first message must be Register");
      refusal = checked.message();
      if (checked.ok()) {
        w.info = m.register_();
        w.info.clear_cluster_token();
        w.registered = true;
        w.period.emplace(w.id, w.info, std::chrono::system_clock::now(),
                         options_.billed_from ? options_.billed_from(w.info) : std::nullopt);
        loads_.Join(w.id, w.info, std::chrono::steady_clock::now());
        conn->set_max_frame_bytes(options_.registered_frame_bytes);
        accepted = true;
        capacity_changed = true;
        spdlog::info("worker {} joined: {} {} {} pages={} from {}", conn_id, w.info.name(),
                     w.info.role(), w.info.capacity_class(), w.info.kv_pages(), conn->peer());
        if (options_.on_period) {
          actions.periods.push_back(w.period->Update(std::chrono::system_clock::now(), false));
        }
        JoinPrefixIndexLocked(w, actions);
      }
    } else if (m.has_load()) {
      // A heartbeat repeating the last Load is no news for the admission queue: pumping it
      // for each of hundreds of workers' heartbeats made a full pass over the workers per Load.
      capacity_changed = loads_.OnLoad(w.id, m.load());
      const auto now = std::chrono::system_clock::now();
      if (options_.on_period && w.period->DueForUpdate(now)) {
        actions.periods.push_back(w.period->Update(now, false));
      }
    } else if (m.has_step()) {
      HandleStepLocked(w, m.step());
    } else if (m.has_reserved()) {
      HandleReservedLocked(w, m.reserved(), actions);
    } else if (m.has_tokens()) {
      HandleTokensLocked(w, m.tokens(), actions);
    } else if (m.has_error()) {
      HandleErrorLocked(w, m.error(), actions);
    } else if (m.has_kv_events()) {
      HandleKvEventsLocked(w, m.kv_events(), actions);
    } else if (m.has_kv_snapshot()) {
      HandleKvSnapshotLocked(w, m.kv_snapshot());
    }  // anything else from a worker is ignored
  }
  if (!refusal.empty()) {
    spdlog::warn("refused worker from {}: {}", conn->peer(), refusal);
    proto::Envelope reply;
    reply.mutable_register_reply()->set_accepted(false);
    reply.mutable_register_reply()->set_error(refusal);
    conn->Send(reply);
    conn->Close(FailedPrecondition(refusal));
    return;
  }
  if (accepted) {  // before the actions: a KvResyncRequest follows the reply
    proto::Envelope reply;
    reply.mutable_register_reply()->set_accepted(true);
    reply.mutable_register_reply()->set_worker_id(conn_id);
    conn->Send(reply);
  }
  capacity_changed = capacity_changed || actions.released;
  actions.Run();
  for (const auto& p : actions.periods) options_.on_period(p);
  if (capacity_changed && options_.on_capacity) options_.on_capacity();
}

void WorkerRegistry::HandleStepLocked(Worker& w, const proto::StepReport& step) {
  if (!WellFormedStep(step)) {
    spdlog::warn("worker {} sent a malformed step report; ignored", w.id);
    return;
  }
  loads_.OnStep(w.id, step);
  // Only the attempts this worker holds a part of are charged; the rest of the step stays idle
  // time (step_cost.h).
  w.period->AddBusy(ChargeStep(w.id, step, [&](uint64_t request_id) -> AttemptUsage* {
    auto f = attempts_.find(request_id);
    return f != attempts_.end() && f->second.open.count(w.id) ? &f->second.cost : nullptr;
  }));
}

void WorkerRegistry::OnClose(uint64_t conn_id, const Status& why) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    auto it = workers_.find(conn_id);
    if (it == workers_.end()) return;
    Worker& w = it->second;
    if (w.registered) {
      spdlog::warn("worker {} ({}) left: {}", conn_id, w.info.name(), why.ToString());
      if (options_.on_period) {
        actions.periods.push_back(w.period->Update(std::chrono::system_clock::now(), true));
      }
    }
    for (uint64_t id : loads_.HeldBy(conn_id)) {
      auto f = attempts_.find(id);
      if (f == attempts_.end()) continue;
      FailLocked(id, f->second,
                 {"the worker serving this request was lost (" + why.message() + ")", true, false,
                  conn_id},
                 conn_id, actions);
      ReleaseLocked(id, f->second, &w, actions);
    }
    loads_.Leave(conn_id);
    LeavePrefixIndexLocked(conn_id);
    workers_.erase(it);
  }
  actions.Run();
  for (const auto& p : actions.periods) options_.on_period(p);
}

void WorkerRegistry::SweepHeartbeats() {
  constexpr std::chrono::milliseconds kSweepPeriod{250};
  sweep_timer_.expires_after(kSweepPeriod);
  sweep_timer_.async_wait([weak = weak_from_this(), kSweepPeriod](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    const auto now = std::chrono::steady_clock::now();
    // A sweep this late means the gateway did not run meanwhile: what its workers sent in that
    // time waits unread in the sockets, so the time does not count as their silence.
    const auto stalled = now - self->last_sweep_ - kSweepPeriod;
    self->last_sweep_ = now;
    const bool beat = now - self->last_heartbeat_ >= self->options_.heartbeat_interval;
    if (beat) self->last_heartbeat_ = now;
    std::vector<std::shared_ptr<FramedConnection>> stale, alive;
    {
      std::lock_guard lock(self->mu_);
      for (auto& [id, w] : self->workers_) {
        if (stalled > 4 * kSweepPeriod) w.last_seen = std::min(now, w.last_seen + stalled);
        if (now - w.last_seen > self->options_.heartbeat_timeout) {
          stale.push_back(w.conn);
        } else if (beat && w.registered) {
          alive.push_back(w.conn);
        }
      }
    }
    if (stalled > 4 * kSweepPeriod) {
      spdlog::warn(
          "the gateway did not run for {} ms; its workers' heartbeats are not held "
          "against them",
          std::chrono::duration_cast<std::chrono::milliseconds>(stalled).count());
    }
    for (auto& c : stale) c->Close(DeadlineExceeded("no heartbeat"));
    self->EnforcePhaseDeadlines(now);
    proto::Envelope heartbeat;
    heartbeat.mutable_heartbeat();
    for (auto& c : alive) c->Send(heartbeat);
    self->CloseAbandonedAttempts(now);
    self->SweepHeartbeats();
  });
}

std::vector<WorkerSummary> WorkerRegistry::Workers() const {
  std::lock_guard lock(mu_);
  return loads_.Summaries();
}

std::vector<router::WorkerLoad> WorkerRegistry::LoadSnapshot() const {
  std::lock_guard lock(mu_);
  return loads_.SnapshotWithIdleTimes(std::chrono::steady_clock::now());
}

bool WorkerRegistry::HasRoute() const {
  std::lock_guard lock(mu_);
  return loads_.HasRoute(*options_.router);
}

int64_t WorkerRegistry::LargestKvTokens() const {
  std::lock_guard lock(mu_);
  return loads_.LargestKvTokens();
}

router::PrefillCapacity WorkerRegistry::Prefill() const {
  std::lock_guard lock(mu_);
  return loads_.Prefill(std::chrono::steady_clock::now());
}

}  // namespace pdserve::router
