#include "gateway/worker_registry.h"

#include <spdlog/spdlog.h>

namespace pdserve::gateway {

namespace asio = boost::asio;
using asio::ip::tcp;

WorkerRegistry::WorkerRegistry(asio::io_context& io, RegistryOptions options)
    : io_(io), options_(std::move(options)), acceptor_(io), sweep_timer_(io) {}

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
        if (!ec) {
          auto conn = FramedConnection::Create(std::move(socket));
          uint64_t id;
          {
            std::lock_guard lock(self->mu_);
            id = self->next_id_++;
            Worker& w = self->workers_[id];
            w.id = id;
            w.conn = conn;
            w.last_seen = std::chrono::steady_clock::now();
          }
          std::weak_ptr<WorkerRegistry> weak = self;
          conn->Start(
              [weak, id](proto::Envelope&& m) {
                if (auto s = weak.lock()) s->OnMessage(id, std::move(m));
              },
              [weak, id](const Status& why) {
                if (auto s = weak.lock()) s->OnClose(id, why);
              });
        }
        self->Accept();
      });
}

void WorkerRegistry::OnMessage(uint64_t conn_id, proto::Envelope&& m) {
  std::shared_ptr<RequestSink> sink;
  std::shared_ptr<FramedConnection> conn;
  std::string refusal;
  {
    std::lock_guard lock(mu_);
    auto it = workers_.find(conn_id);
    if (it == workers_.end()) return;
    Worker& w = it->second;
    w.last_seen = std::chrono::steady_clock::now();
    conn = w.conn;
    if (!w.registered) {
      if (!m.has_register_()) {
        refusal = "the first message must be Register";
      } else if (!options_.cluster_token.empty() &&
                 m.register_().cluster_token() != options_.cluster_token) {
        refusal = "wrong cluster token";
      } else if (m.register_().model_id() != options_.model_id) {
        refusal = "gateway serves model '" + options_.model_id + "', worker has '" +
                  m.register_().model_id() + "'";
      } else if (m.register_().role() != "both") {
        refusal = "role '" + m.register_().role() +
                  "' is not served by this gateway build (use --role both)";
      } else {
        w.info = m.register_();
        w.info.clear_cluster_token();
        w.registered = true;
        w.load.set_free_pages(w.info.kv_pages());
        spdlog::info("worker {} joined: {} {} {} pages={} from {}", conn_id, w.info.name(),
                     w.info.role(), w.info.capacity_class(), w.info.kv_pages(), conn->peer());
      }
    } else if (m.has_load()) {
      w.load = m.load();
      return;
    } else if (m.has_tokens() || m.has_error()) {
      const uint64_t request_id = m.has_tokens() ? m.tokens().request_id() : m.error().request_id();
      auto r = requests_.find(request_id);
      if (r == requests_.end() || r->second.worker_id != conn_id) return;  // cancelled or stale
      sink = r->second.sink;
      const bool done = m.has_error() || !m.tokens().finish_reason().empty();
      if (done) {
        requests_.erase(r);
        w.requests.erase(request_id);
      }
    } else {
      return;  // unknown or unexpected messages from a worker are ignored
    }
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
  if (m.has_register_()) {
    proto::Envelope reply;
    reply.mutable_register_reply()->set_accepted(true);
    reply.mutable_register_reply()->set_worker_id(conn_id);
    conn->Send(reply);
    return;
  }
  if (sink && m.has_tokens()) sink->OnTokens(m.tokens());
  if (sink && m.has_error()) sink->OnFailure(m.error().message(), m.error().retryable());
}

void WorkerRegistry::OnClose(uint64_t conn_id, const Status& why) {
  std::vector<std::shared_ptr<RequestSink>> orphans;
  {
    std::lock_guard lock(mu_);
    auto it = workers_.find(conn_id);
    if (it == workers_.end()) return;
    if (it->second.registered)
      spdlog::warn("worker {} ({}) left: {}", conn_id, it->second.info.name(), why.ToString());
    for (uint64_t r : it->second.requests) {
      auto req = requests_.find(r);
      if (req == requests_.end()) continue;
      orphans.push_back(req->second.sink);
      requests_.erase(req);
    }
    workers_.erase(it);
  }
  for (auto& sink : orphans)
    sink->OnFailure("the worker serving this request was lost (" + why.message() + ")", true);
}

void WorkerRegistry::SweepHeartbeats() {
  sweep_timer_.expires_after(std::chrono::milliseconds(250));
  sweep_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<FramedConnection>> stale;
    {
      std::lock_guard lock(self->mu_);
      for (auto& [id, w] : self->workers_) {
        if (now - w.last_seen > self->options_.heartbeat_timeout) stale.push_back(w.conn);
      }
    }
    for (auto& c : stale) c->Close(DeadlineExceeded("no heartbeat"));
    self->SweepHeartbeats();
  });
}

Result<uint64_t> WorkerRegistry::Dispatch(const proto::Generate& request,
                                          std::shared_ptr<RequestSink> sink,
                                          const std::set<uint64_t>& exclude) {
  std::shared_ptr<FramedConnection> conn;
  uint64_t chosen = 0;
  {
    std::lock_guard lock(mu_);
    // Most free KV pages (less what was sent since its last Load), then fewest running.
    int64_t best_score = INT64_MIN;
    for (auto& [id, w] : workers_) {
      if (!w.registered || w.load.draining() || exclude.count(id)) continue;
      const int64_t score = static_cast<int64_t>(w.load.free_pages()) * 1024 -
                            static_cast<int64_t>(w.requests.size() + w.load.running());
      if (score > best_score) {
        best_score = score;
        chosen = id;
      }
    }
    if (chosen == 0) return Unavailable("no worker is available for this model right now");
    Worker& w = workers_[chosen];
    w.requests.insert(request.request_id());
    requests_[request.request_id()] = InFlight{chosen, std::move(sink)};
    conn = w.conn;
  }
  proto::Envelope m;
  *m.mutable_generate() = request;
  conn->Send(m);
  return chosen;
}

void WorkerRegistry::Cancel(uint64_t request_id) {
  std::shared_ptr<FramedConnection> conn;
  {
    std::lock_guard lock(mu_);
    auto r = requests_.find(request_id);
    if (r == requests_.end()) return;
    auto w = workers_.find(r->second.worker_id);
    if (w != workers_.end()) {
      w->second.requests.erase(request_id);
      conn = w->second.conn;
    }
    requests_.erase(r);
  }
  if (conn) {
    proto::Envelope m;
    m.mutable_cancel()->set_request_id(request_id);
    conn->Send(m);
  }
}

std::vector<WorkerSummary> WorkerRegistry::Workers() const {
  std::lock_guard lock(mu_);
  std::vector<WorkerSummary> out;
  for (const auto& [id, w] : workers_) {
    if (!w.registered) continue;
    out.push_back({id, w.info.role(), w.info.capacity_class(), w.info.name(), w.load.free_pages(),
                   w.load.running(), static_cast<int>(w.requests.size()), w.load.draining()});
  }
  return out;
}

std::optional<proto::Register> WorkerRegistry::Registration(uint64_t worker_id) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return std::nullopt;
  return it->second.info;
}

}  // namespace pdserve::gateway
