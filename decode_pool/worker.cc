#include "decode_pool/worker.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace pdserve::decode_pool {

namespace asio = boost::asio;

Result<std::unique_ptr<Worker>> Worker::Create(const WorkerOptions& options) {
  if (options.role != "both") {
    return Unimplemented("worker role '" + options.role + "': this build serves --role both");
  }
  if (options.capacity_class != "reserved" && options.capacity_class != "burst") {
    return InvalidArgument("capacity class must be reserved or burst, got '" +
                           options.capacity_class + "'");
  }
  if (options.gateway_port == 0) return InvalidArgument("the gateway's control port is required");
  PDSERVE_ASSIGN_OR_RETURN(auto engine, model::Engine::Load(options.model_dir, options.engine));
  return std::unique_ptr<Worker>(new Worker(options, std::move(engine)));
}

Worker::Worker(const WorkerOptions& options, std::unique_ptr<model::Engine> engine)
    : options_(options), engine_(std::move(engine)) {}

Worker::~Worker() { io_.stop(); }

void Worker::Drain() {
  draining_ = true;
  wake_.notify_all();
}

Status Worker::Run() {
  auto socket =
      DialTcp(io_, options_.gateway_host, options_.gateway_port,
              std::chrono::milliseconds(static_cast<int>(options_.connect_timeout_seconds * 1000)));
  if (!socket.ok()) return socket.status();
  gateway_ = FramedConnection::Create(std::move(socket).value());
  gateway_->Start([this](proto::Envelope&& m) { OnMessage(std::move(m)); },
                  [this](const Status& why) {
                    std::lock_guard lock(mu_);
                    connection_lost_ = true;
                    lost_status_ = why;
                    wake_.notify_all();
                  });
  proto::Envelope hello;
  proto::Register* r = hello.mutable_register_();
  const auto& c = engine_->config();
  r->set_role(options_.role);
  r->set_capacity_class(options_.capacity_class);
  r->set_price_per_gpu_hour(options_.price_per_gpu_hour);
  r->set_gpu_count(options_.gpu_count);
  r->set_device(engine_->backend().device());
  r->set_kv_pages(engine_->pages().num_pages());
  r->set_page_size(engine_->backend().kv_shape().page_size);
  r->set_cluster_token(options_.cluster_token);
  r->set_model_id(c.model_id);
  r->set_max_context(c.max_seq_len);
  r->set_zone(options_.zone);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  r->set_name(std::string(host) + ":" + std::to_string(::getpid()));
  gateway_->Send(hello);

  std::thread network([this] {
    auto guard = asio::make_work_guard(io_);
    io_.run();
  });
  EngineLoop();
  // Let the last TokenBatch messages reach the gateway before the connection goes.
  gateway_->CloseAfterFlush(Status::Ok());
  {
    std::unique_lock lock(mu_);
    wake_.wait_for(lock, std::chrono::seconds(10), [&] { return connection_lost_; });
  }
  io_.stop();
  network.join();
  std::lock_guard lock(mu_);
  if (connection_lost_ && !draining_) return lost_status_;
  return Status::Ok();
}

void Worker::OnMessage(proto::Envelope&& message) {
  if (message.has_register_reply()) {
    if (!message.register_reply().accepted()) {
      spdlog::error("gateway refused registration: {}", message.register_reply().error());
      gateway_->Close(
          FailedPrecondition("registration refused: " + message.register_reply().error()));
      return;
    }
    registered_ = true;
    spdlog::info("registered with the gateway as worker {}", message.register_reply().worker_id());
    return;
  }
  std::lock_guard lock(mu_);
  inbox_.push_back(std::move(message));
  wake_.notify_all();
}

void Worker::SendLoad() {
  proto::Envelope m;
  proto::Load* load = m.mutable_load();
  load->set_free_pages(engine_->pages().free_pages());
  load->set_running(engine_->num_running());
  load->set_waiting(engine_->num_waiting());
  load->set_draining(draining_);
  gateway_->Send(m);
}

void Worker::EngineLoop() {
  using Clock = std::chrono::steady_clock;
  const auto heartbeat = std::chrono::duration<double>(options_.heartbeat_seconds);
  auto next_heartbeat = Clock::now();
  bool announced_drain = false;
  std::vector<model::TokenEvent> events;
  model::StepStats stats;
  std::deque<proto::Envelope> work;
  while (true) {
    {
      std::unique_lock lock(mu_);
      if (!engine_->HasWork()) {
        wake_.wait_until(lock,
                         Clock::now() + std::chrono::duration_cast<Clock::duration>(heartbeat),
                         [&] { return !inbox_.empty() || connection_lost_ || draining_; });
      }
      if (connection_lost_) break;
      work.swap(inbox_);
    }
    for (auto& m : work) {
      if (m.has_generate()) {
        const proto::Generate& g = m.generate();
        if (draining_) {
          proto::Envelope e;
          e.mutable_error()->set_request_id(g.request_id());
          e.mutable_error()->set_message("worker is draining");
          e.mutable_error()->set_retryable(true);
          gateway_->Send(e);
          continue;
        }
        model::SamplingParams p;
        const proto::Sampling& s = g.sampling();
        p.temperature = s.temperature();
        p.top_p = s.top_p();
        p.top_k = s.top_k();
        if (s.has_seed()) p.seed = s.seed();
        p.max_tokens = s.max_tokens();
        p.ignore_eos = s.ignore_eos();
        p.stop_token_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
        std::vector<int32_t> prompt(g.prompt().begin(), g.prompt().end());
        const int prompt_len = static_cast<int>(prompt.size());
        auto seq = engine_->Add(std::move(prompt), p);
        if (!seq.ok()) {
          proto::Envelope e;
          e.mutable_error()->set_request_id(g.request_id());
          e.mutable_error()->set_message(seq.status().message());
          e.mutable_error()->set_retryable(false);
          gateway_->Send(e);
          continue;
        }
        by_seq_[*seq] = Active{g.request_id(), 0, 0, prompt_len};
        seq_of_request_[g.request_id()] = *seq;
      } else if (m.has_cancel()) {
        auto it = seq_of_request_.find(m.cancel().request_id());
        if (it != seq_of_request_.end()) engine_->Cancel(it->second);
      }
    }
    work.clear();

    if (engine_->HasWork()) {
      events.clear();
      Status s = engine_->Step(&events, &stats);
      if (!s.ok()) {
        spdlog::error("engine step failed: {}", s.ToString());
        break;
      }
      // Share the step's time among its sequences by tokens (ARCHITECTURE.md, cost model).
      int total = 0;
      for (int t : stats.seq_tokens) total += t;
      for (size_t i = 0; i < stats.seq_ids.size(); ++i) {
        auto it = by_seq_.find(stats.seq_ids[i]);
        if (it == by_seq_.end() || total == 0) continue;
        const double share = stats.seconds * stats.seq_tokens[i] / total;
        Active& a = it->second;
        // Until a sequence has run one step it is in its prompt; a chunk of several tokens is too.
        const bool prompt =
            stats.seq_tokens[i] > 1 || (a.prefill_seconds == 0 && a.decode_seconds == 0);
        (prompt ? a.prefill_seconds : a.decode_seconds) += share;
      }
      std::unordered_map<uint64_t, proto::Envelope> batches;
      for (const auto& e : events) {
        auto it = by_seq_.find(e.seq_id);
        if (it == by_seq_.end()) continue;
        proto::TokenBatch* b = batches[e.seq_id].mutable_tokens();
        b->set_request_id(it->second.request_id);
        if (e.token >= 0) b->add_tokens(e.token);
        b->set_last_is_stop_token(e.is_stop_token);
        b->set_prefill_seconds(it->second.prefill_seconds);
        b->set_decode_seconds(it->second.decode_seconds);
        if (e.finish != model::FinishReason::kNone)
          b->set_finish_reason(model::FinishReasonName(e.finish));
      }
      for (auto& [seq, m] : batches) {
        gateway_->Send(m);
        if (!m.tokens().finish_reason().empty()) {
          seq_of_request_.erase(m.tokens().request_id());
          by_seq_.erase(seq);
        }
      }
    }
    if (draining_ && !announced_drain) {
      announced_drain = true;
      SendLoad();
      spdlog::info("draining: finishing {} running and {} waiting sequences",
                   engine_->num_running(), engine_->num_waiting());
    }
    if (draining_ && !engine_->HasWork()) break;
    if (Clock::now() >= next_heartbeat) {
      SendLoad();
      next_heartbeat = Clock::now() + std::chrono::duration_cast<Clock::duration>(heartbeat);
    }
  }
}

}  // namespace pdserve::decode_pool
