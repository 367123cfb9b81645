#include "router/worker_registry.h"

#include "router/routers.h"
#include "router/step_shares.h"

#include <cmath>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace pdserve::gateway {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
// The KV an attempt reserves on its decode worker, in tokens: its prompt and every token it may
// generate (the worker caps this at its context).
int KvTokens(size_t prompt_tokens, const proto::Sampling& sampling) {
  return static_cast<int>(std::min<int64_t>(
      INT32_MAX, static_cast<int64_t>(prompt_tokens) + std::max(0, sampling.max_tokens())));
}
}  // namespace

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
  if (r.capacity_class() != "reserved" && r.capacity_class() != "burst") {
    return InvalidArgument("capacity class must be reserved or burst, got '" + r.capacity_class() +
                           "'");
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

WorkerPeriodUpdate WorkerRegistry::PeriodOf(const Worker& w, bool ended) const {
  WorkerPeriodUpdate u;
  u.worker_id = w.id;
  u.info = w.info;
  u.start = w.billed_from;
  u.last_seen = std::chrono::system_clock::now();
  u.busy_seconds = w.busy_seconds;
  u.ended = ended;
  return u;
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
        w.joined = w.last_period_update = std::chrono::system_clock::now();
        w.billed_from = w.joined;
        if (options_.billed_from) {
          if (auto from = options_.billed_from(w.info); from && *from < w.joined) {
            w.billed_from = *from;
          }
        }
        w.last_busy = std::chrono::steady_clock::now();
        w.load.set_free_pages(w.info.kv_pages());
        conn->set_max_frame_bytes(options_.registered_frame_bytes);
        accepted = true;
        capacity_changed = true;
        spdlog::info("worker {} joined: {} {} {} pages={} from {}", conn_id, w.info.name(),
                     w.info.role(), w.info.capacity_class(), w.info.kv_pages(), conn->peer());
        if (options_.on_period) actions.periods.push_back(PeriodOf(w, false));
      }
    } else if (m.has_load()) {
      w.load = m.load();
      // A Load sent after its answer to a Reserve (or its first tokens) counts that attempt's
      // pages among the used ones.
      for (uint64_t a : w.attempts) {
        auto f = attempts_.find(a);
        if (f != attempts_.end() && f->second.cost.decode_worker == w.id &&
            f->second.kv_count == KvCount::kAnswered) {
          f->second.kv_count = KvCount::kInLoad;
        }
      }
      capacity_changed = true;
      // What it may claim is what it registered: no more free pages than its pool, no negatives.
      if (w.load.free_pages() > w.info.kv_pages() && !w.overclaimed) {
        w.overclaimed = true;
        spdlog::warn("worker {} ({}) reports {} free KV pages of the {} it registered; counting {}",
                     conn_id, w.info.name(), w.load.free_pages(), w.info.kv_pages(),
                     w.info.kv_pages());
      }
      w.load.set_free_pages(std::clamp(w.load.free_pages(), 0, w.info.kv_pages()));
      w.load.set_running(std::max(0, w.load.running()));
      w.load.set_waiting(std::max(0, w.load.waiting()));
      const auto now = std::chrono::system_clock::now();
      if (options_.on_period && now - w.last_period_update >= std::chrono::seconds(1)) {
        w.last_period_update = now;
        actions.periods.push_back(PeriodOf(w, false));
      }
    } else if (m.has_step()) {
      HandleStepLocked(w, m.step());
    } else if (m.has_reserved()) {
      HandleReservedLocked(w, m.reserved(), actions);
    } else if (m.has_tokens()) {
      HandleTokensLocked(w, m.tokens(), actions);
    } else if (m.has_error()) {
      HandleErrorLocked(w, m.error(), actions);
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
  if (accepted) {
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

void WorkerRegistry::SendLocked(uint64_t worker_id, proto::Envelope m, Actions& actions) {
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) actions.sends.emplace_back(it->second.conn, std::move(m));
}

void WorkerRegistry::HandleStepLocked(Worker& w, const proto::StepReport& step) {
  const int n = step.request_ids_size();
  const bool counts_ok =
      std::all_of(step.tokens().begin(), step.tokens().end(), [](int32_t t) { return t >= 0; });
  if (step.tokens_size() != n || step.prompt_size() != n || !(step.seconds() >= 0) ||
      !std::isfinite(step.seconds()) || !counts_ok) {
    spdlog::warn("worker {} sent a malformed step report; ignored", w.id);
    return;
  }
  // Busy time is what was charged to attempts: the share of a request this worker holds no part
  // of (closed, or never its) goes to no row and so stays idle time, and each worker's rows add
  // up to its busy seconds (conservation, docs/architecture.md "Cost model").
  int64_t prompt_tokens = 0;
  for (int i = 0; i < n; ++i) {
    if (step.prompt(i)) prompt_tokens += step.tokens(i);
  }
  if (prompt_tokens > 0 && step.seconds() > 0) {
    // Prompt tokens a second while it runs prompts: an average over about the last ten steps.
    const double rate = static_cast<double>(prompt_tokens) / step.seconds();
    w.prefill_tokens_per_second =
        w.prefill_tokens_per_second > 0 ? 0.9 * w.prefill_tokens_per_second + 0.1 * rate : rate;
  }
  const std::vector<double> shares =
      router::StepShares(step.seconds(), {step.tokens().data(), static_cast<size_t>(n)});
  for (int i = 0; i < n; ++i) {
    auto f = attempts_.find(step.request_ids(i));
    if (f == attempts_.end() || !f->second.open.count(w.id)) continue;
    AttemptUsage& c = f->second.cost;
    const bool colocated = c.prefill_worker == c.decode_worker;
    if (w.id == c.prefill_worker && (!colocated || step.prompt(i))) {
      c.prefill_step_seconds += shares[i];
    } else {
      c.decode_step_seconds += shares[i];
    }
    w.busy_seconds += shares[i];
  }
}

void WorkerRegistry::HandleReservedLocked(Worker& w, const proto::Reserved& reserved,
                                          Actions& actions) {
  auto it = attempts_.find(reserved.request_id());
  if (it == attempts_.end()) return;
  InFlight& f = it->second;
  if (f.phase != Phase::kReserving || w.id != f.cost.decode_worker || !f.sink_active) return;
  if (f.kv_count == KvCount::kPending) f.kv_count = KvCount::kAnswered;
  // Pages of its registered pool, enough for the prompt: else the prefill worker would write
  // where the decode worker never reserved.
  const int64_t needed = (static_cast<int64_t>(f.prompt.size()) + w.info.page_size() - 1) /
                         std::max(1, w.info.page_size());
  const bool in_pool = std::all_of(reserved.page_ids().begin(), reserved.page_ids().end(),
                                   [&](int32_t p) { return p >= 0 && p < w.info.kv_pages(); });
  if (!in_pool || reserved.page_ids_size() < needed ||
      reserved.layout_hash() != w.info.layout_hash()) {
    spdlog::warn(
        "worker {} ({}) answered Reserve with {} pages that are not a reservation of its "
        "pool of {} for {} prompt tokens; dropping it",
        w.id, w.info.name(), reserved.page_ids_size(), w.info.kv_pages(), f.prompt.size());
    actions.calls.push_back([conn = w.conn] {
      conn->Close(InvalidArgument("a Reserved outside the registered KV pool"));
    });
    return FailLocked(it->first, f,
                      {"the decode worker answered with an invalid reservation", true, false, w.id},
                      0, actions);
  }
  auto p = workers_.find(f.cost.prefill_worker);
  if (p == workers_.end()) {
    return FailLocked(
        it->first, f,
        {"the prefill worker chosen for this request was lost", true, false, f.cost.prefill_worker},
        0, actions);
  }
  proto::Envelope m;
  proto::Prefill* prefill = m.mutable_prefill();
  prefill->set_request_id(it->first);
  prefill->mutable_prompt()->Add(f.prompt.begin(), f.prompt.end());
  *prefill->mutable_sampling() = f.sampling;
  *prefill->mutable_destination() = reserved;
  prefill->set_deadline_seconds(options_.kv_deadline_seconds);
  f.phase = Phase::kPrefilling;
  f.phase_since = std::chrono::steady_clock::now();
  f.open.insert(p->first);
  p->second.attempts.insert(it->first);
  p->second.last_busy = std::chrono::steady_clock::now();
  if (p->second.sent_prompt_tokens <= 0) p->second.prompt_work_since = p->second.last_busy;
  p->second.sent_prompt_tokens += static_cast<int64_t>(f.prompt.size());
  actions.sends.emplace_back(p->second.conn, std::move(m));
}

void WorkerRegistry::HandleTokensLocked(Worker& w, const proto::TokenBatch& batch,
                                        Actions& actions) {
  auto it = attempts_.find(batch.request_id());
  if (it == attempts_.end() || !it->second.open.count(w.id)) return;  // stale
  const uint64_t id = it->first;
  InFlight& f = it->second;
  const bool ended = !batch.finish_reason().empty();
  if (w.id == f.cost.decode_worker && f.kv_count == KvCount::kPending) {
    f.kv_count = KvCount::kAnswered;  // a colocated worker's first tokens: its pages are taken
  }
  if (f.phase == Phase::kPrefilling && w.id == f.cost.prefill_worker) {
    // The prefill worker's answer: the first token, its KV acknowledged by the decode worker.
    w.sent_prompt_tokens -= static_cast<int64_t>(f.prompt.size());
    w.prompt_work_since = std::chrono::steady_clock::now();
    f.cost.kv_bytes = batch.kv_bytes();
    f.phase = Phase::kDecoding;
    f.phase_since = std::chrono::steady_clock::now();
    if (f.sink_active && batch.finish_reason() != "cancelled") {
      proto::Envelope m;
      if (ended) {  // the request ends at its first token: the decode worker frees its pages
        m.mutable_cancel()->set_request_id(id);
      } else {
        proto::KvDone* done = m.mutable_kv_done();
        done->set_request_id(id);
        done->set_first_token(batch.tokens_size() > 0 ? batch.tokens(0) : 0);
        done->set_kv_bytes(batch.kv_bytes());
        done->set_transfer_seconds(batch.transfer_seconds());
      }
      SendLocked(f.cost.decode_worker, std::move(m), actions);
      actions.calls.push_back([sink = f.sink, batch] { sink->OnTokens(batch); });
      if (ended) f.Deactivate();
    }
    return ReleaseLocked(id, f, &w, actions);
  }
  f.phase_since = std::chrono::steady_clock::now();  // progress: the stall deadline restarts
  if (f.sink_active) {
    actions.calls.push_back([sink = f.sink, batch] { sink->OnTokens(batch); });
    if (ended) f.Deactivate();
  }
  if (ended) ReleaseLocked(id, f, &w, actions);
}

void WorkerRegistry::HandleErrorLocked(Worker& w, const proto::RequestError& error,
                                       Actions& actions) {
  auto it = attempts_.find(error.request_id());
  if (it == attempts_.end() || !it->second.open.count(w.id)) return;
  InFlight& f = it->second;
  if (f.phase == Phase::kPrefilling && w.id == f.cost.prefill_worker) {
    w.sent_prompt_tokens -= static_cast<int64_t>(f.prompt.size());
    w.prompt_work_since = std::chrono::steady_clock::now();
  }
  const uint64_t failed = error.peer_failed() ? f.cost.decode_worker : w.id;
  FailLocked(it->first, f,
             {error.message(), error.retryable(), error.no_room(), failed, error.preempted()}, w.id,
             actions);
  ReleaseLocked(it->first, f, &w, actions);
}

void WorkerRegistry::FailLocked(uint64_t attempt_id, InFlight& f, AttemptFailure failure,
                                uint64_t except_worker, Actions& actions) {
  if (f.sink_active) {
    f.Deactivate();
    actions.calls.push_back(
        [sink = f.sink, failure = std::move(failure)] { sink->OnFailure(failure); });
  }
  for (uint64_t other : f.open) {
    if (other == except_worker) continue;
    proto::Envelope m;
    m.mutable_cancel()->set_request_id(attempt_id);
    SendLocked(other, std::move(m), actions);
  }
}

void WorkerRegistry::ReleaseLocked(uint64_t attempt_id, InFlight& f, Worker* w, Actions& actions) {
  if (w) {
    f.open.erase(w->id);
    w->attempts.erase(attempt_id);
    w->last_busy = std::chrono::steady_clock::now();
    actions.released = true;
  }
  if (!f.open.empty()) return;
  actions.calls.push_back([sink = f.sink, cost = f.cost] { sink->OnAttemptClosed(cost); });
  attempts_.erase(attempt_id);
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
      if (options_.on_period) actions.periods.push_back(PeriodOf(w, true));
    }
    const std::set<uint64_t> held = w.attempts;
    for (uint64_t id : held) {
      auto f = attempts_.find(id);
      if (f == attempts_.end()) continue;
      FailLocked(id, f->second,
                 {"the worker serving this request was lost (" + why.message() + ")", true, false,
                  conn_id},
                 conn_id, actions);
      ReleaseLocked(id, f->second, &w, actions);
    }
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

void WorkerRegistry::EnforcePhaseDeadlines(std::chrono::steady_clock::time_point now) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    const auto prefill_deadline = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(options_.kv_deadline_seconds)) +
                                  options_.prefill_grace;
    std::vector<uint64_t> late;
    for (const auto& [id, f] : attempts_) {
      if (!f.sink_active) continue;
      const auto in_phase = now - f.phase_since;
      const bool past = f.phase == Phase::kReserving    ? in_phase > options_.reserve_timeout
                        : f.phase == Phase::kPrefilling ? in_phase > prefill_deadline
                                                        : in_phase > options_.token_stall_timeout;
      if (past) late.push_back(id);
    }
    for (uint64_t id : late) {
      InFlight& f = attempts_[id];
      const char* phase = f.phase == Phase::kReserving    ? "reserve KV pages"
                          : f.phase == Phase::kPrefilling ? "prefill the prompt"
                                                          : "send its next tokens";
      const uint64_t slow =
          f.phase == Phase::kPrefilling ? f.cost.prefill_worker : f.cost.decode_worker;
      std::string why = "the worker chosen to " + std::string(phase) + " did not answer in time";
      spdlog::warn("attempt {}: {}", id, why);
      if (f.phase == Phase::kReserving) {
        // It heartbeats but does not serve: no more requests go to it.
        if (auto w = workers_.find(slow); w != workers_.end()) {
          actions.calls.push_back([conn = w->second.conn] {
            conn->Close(DeadlineExceeded("did not answer Reserve in time"));
          });
        }
      }
      FailLocked(id, f, {why, true, false, slow}, 0, actions);
    }
  }
  actions.Run();
}

void WorkerRegistry::CloseAbandonedAttempts(std::chrono::steady_clock::time_point now) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    std::vector<uint64_t> abandoned;
    for (const auto& [id, f] : attempts_) {
      if (!f.sink_active && now - f.inactive_since > options_.abandon_after)
        abandoned.push_back(id);
    }
    for (uint64_t id : abandoned) {
      InFlight& f = attempts_[id];
      spdlog::warn("attempt {}: {} worker(s) never confirmed its end; closing it", id,
                   f.open.size());
      for (uint64_t w : f.open) {
        if (auto it = workers_.find(w); it != workers_.end()) {
          it->second.attempts.erase(id);
          it->second.last_busy = std::chrono::steady_clock::now();
        }
      }
      f.open.clear();
      ReleaseLocked(id, f, nullptr, actions);  // nothing open: closes it
    }
  }
  actions.Run();
}

Result<Attempt> WorkerRegistry::Dispatch(uint64_t attempt_id, const std::vector<int32_t>& prompt,
                                         const proto::Sampling& sampling,
                                         std::shared_ptr<RequestSink> sink,
                                         const std::set<uint64_t>& exclude,
                                         const std::set<std::string>& zones) {
  Actions actions;
  Attempt attempt;
  {
    std::lock_guard lock(mu_);
    if (attempts_.count(attempt_id)) return InvalidArgument("attempt id reused");
    router::RouteRequest request;
    request.prompt_tokens = static_cast<int>(prompt.size());
    request.kv_tokens = KvTokens(prompt.size(), sampling);
    request.exclude = exclude;
    request.zones = zones;
    const std::vector<router::WorkerLoad> loads = SnapshotLocked();
    const std::optional<router::Route> route = options_.router->Pick(loads, request);
    auto d_it = route ? workers_.find(route->decode_worker) : workers_.end();
    auto p_it = route ? workers_.find(route->prefill_worker) : workers_.end();
    if (d_it == workers_.end() || p_it == workers_.end()) {
      return Unavailable("no worker is available for this model right now");
    }
    Worker* d = &d_it->second;
    Worker* p = &p_it->second;
    const bool pair =
        route->disaggregated && p->info.role() == "prefill" && d->info.role() == "decode";
    const bool colocated = !route->disaggregated && p == d && d->info.role() == "both";
    if (!d->registered || !p->registered || !(pair || colocated)) {
      return Internal("the router chose workers " + std::to_string(route->prefill_worker) +
                      " and " + std::to_string(route->decode_worker) +
                      ", which cannot serve that route");
    }
    attempt = *route;
    InFlight f;
    f.sink = std::move(sink);
    proto::Envelope m;
    if (route->disaggregated) {
      f.phase = Phase::kReserving;
      f.prompt = prompt;
      f.sampling = sampling;
      proto::Reserve* r = m.mutable_reserve();
      r->set_request_id(attempt_id);
      r->mutable_prompt()->Add(prompt.begin(), prompt.end());
      *r->mutable_sampling() = sampling;
      r->set_deadline_seconds(options_.kv_deadline_seconds);
    } else {
      f.phase = Phase::kGenerating;
      proto::Generate* g = m.mutable_generate();
      g->set_request_id(attempt_id);
      g->mutable_prompt()->Add(prompt.begin(), prompt.end());
      *g->mutable_sampling() = sampling;
    }
    // What D reserves for it, as the router counted D's room.
    const auto d_load = std::find_if(loads.begin(), loads.end(),
                                     [&](const router::WorkerLoad& w) { return w.id == d->id; });
    f.kv_pages = router::InitialKvPages(*d_load, request);
    f.cost.attempt_id = attempt_id;
    f.cost.prefill_worker = p->id;
    f.cost.decode_worker = d->id;
    f.cost.prefill_info = p->info;
    f.cost.decode_info = d->info;
    f.open.insert(d->id);
    d->attempts.insert(attempt_id);
    d->last_busy = std::chrono::steady_clock::now();
    actions.sends.emplace_back(d->conn, std::move(m));
    attempts_.emplace(attempt_id, std::move(f));
  }
  actions.Run();
  return attempt;
}

void WorkerRegistry::Cancel(uint64_t attempt_id) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    auto it = attempts_.find(attempt_id);
    if (it == attempts_.end()) return;
    it->second.Deactivate();
    for (uint64_t w : it->second.open) {
      proto::Envelope m;
      m.mutable_cancel()->set_request_id(attempt_id);
      SendLocked(w, std::move(m), actions);
    }
  }
  actions.Run();
}

}  // namespace pdserve::gateway
