#include "decode_pool/worker.h"

#include "common/host_identity.h"
#include "model/sampling_proto.h"
#include "worker/messages.h"
#include "worker/serve_loop.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

namespace pdserve::decode_pool {

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The prefix cache's salt: the KV layout hash this worker registers.
Result<uint64_t> KvLayoutHash(const model::ModelConfig& config, const model::KvCacheShape& shape) {
  PDSERVE_ASSIGN_OR_RETURN(auto layout,
                           kv_transfer::KvLayout::FromConfig(config, shape.page_size, shape.dtype));
  return layout.hash;
}

}  // namespace

Result<std::unique_ptr<Worker>> Worker::Create(const WorkerOptions& options) {
  if (options.role != "both" && options.role != "decode") {
    return InvalidArgument("a decode worker's role is decode or both, got '" + options.role + "'");
  }
  PDSERVE_RETURN_IF_ERROR(options.Validate());
  model::EngineOptions engine_options = options.engine;
  // A decode worker cannot recompute a prompt it never saw run: the gateway resumes what it
  // preempts on a prefill worker. A colocated worker recomputes in place.
  engine_options.preemption = options.role == "decode"
                                  ? model::EngineOptions::Preemption::kHandBack
                                  : model::EngineOptions::Preemption::kRecompute;
  PDSERVE_ASSIGN_OR_RETURN(
      auto engine, worker::LoadWorkerEngine(options.model_dir, engine_options, KvLayoutHash));
  auto worker = std::unique_ptr<Worker>(new Worker(options, std::move(engine)));
  const model::KvCacheShape& shape = worker->engine_->backend().kv_shape();
  PDSERVE_ASSIGN_OR_RETURN(
      worker->layout_,
      kv_transfer::KvLayout::FromConfig(worker->engine_->config(), shape.page_size, shape.dtype));
  if (options.role == "decode") PDSERVE_RETURN_IF_ERROR(worker->StartKvListener());
  PDSERVE_ASSIGN_OR_RETURN(worker->gpu_uuid_,
                           worker::GpuUuidOf(worker->engine_->backend().device()));
  PDSERVE_ASSIGN_OR_RETURN(worker->metrics_, worker::StartWorkerMetrics(options, options.role));
  PDSERVE_ASSIGN_OR_RETURN(worker->step_log_, worker::OpenStepLog(options));
  return worker;
}

Worker::Worker(const WorkerOptions& options, std::unique_ptr<model::Engine> engine)
    : options_(options), engine_(std::move(engine)) {}

Worker::~Worker() {
  listener_.reset();  // before the receiver it writes into
  receiver_.reset();
}

Status Worker::StartKvListener() {
  const model::KvCacheShape& shape = engine_->backend().kv_shape();
  std::vector<void*> bases;
  for (int l = 0; l < shape.n_layers; ++l) bases.push_back(engine_->backend().KvLayerData(l));
  receiver_ =
      std::make_unique<kv_transfer::KvReceiver>(*layout_, engine_->pages(), std::move(bases));
  kv_transfer::TcpKvListenerOptions o;
  o.bind_address = options_.kv_bind_address;
  o.port = options_.kv_port;
  o.congestion_control = options_.kv_tcp_congestion;
  o.offload_tcp_checksums = options_.kv_offload_checksums;
  if (options_.engine.device.rfind("cuda", 0) == 0) {
    o.pools_on_device = true;
    PDSERVE_ASSIGN_OR_RETURN(o.device, model::ParseCudaDevice(options_.engine.device));
  }
  PDSERVE_ASSIGN_OR_RETURN(listener_, kv_transfer::TcpKvListener::Start(*receiver_, o));
  spdlog::info("receiving KV on {}:{} ({})", options_.kv_advertise_host, listener_->port(),
               layout_->ToString());
  return Status::Ok();
}

void Worker::Drain() {
  draining_ = true;
  if (link_) link_->Wake();
}

Status Worker::Run() {
  proto::Register r = worker::RegisterFor(options_.role, *engine_, options_.identity);
  if (listener_) {
    r.set_kv_endpoint(options_.kv_advertise_host + ":" + std::to_string(listener_->port()));
  }
  // Role both too: the gateway salts its block keys with it, as the engine does.
  r.set_layout_hash(layout_->hash);
  // Always: with its prefix cache off it publishes that it holds nothing (an empty snapshot),
  // where a worker publishing nothing would be matched by where its prompts went.
  r.set_kv_events(true);
  Status served = worker::ConnectAndServe(
      options_.gateway, r, options_.gateway_reconnect_seconds, &link_, [this] { return Serve(); },
      [this] { AbandonRequests(); }, [this] { return draining_.load(); });
  return step_failure_.Or(std::move(served));
}

Status Worker::Serve() {
  kv_events_.Restart();  // a new registration: the gateway asks for a snapshot first
  worker::ServeTurn turn;
  turn.handle = [this](proto::Envelope& m) { Handle(m); };
  // Only engine work keeps the loop turning. A reservation waiting for its KV does not: its
  // KvDone (or Cancel) arrives as a message, which wakes the loop, and a transfer that failed
  // is dropped at the next turn (a heartbeat at the latest). Counting reservations as work made
  // the loop spin a core for as long as a prompt's prefill and transfer took.
  turn.busy = [this] { return engine_->HasWork(); };
  turn.work = [this] {
    DropFailedReservations();
    if (engine_->HasWork()) RunStep();
    // A step caches and evicts blocks, and so does a reservation's allocation.
    kv_events_.SendEvents(*engine_, *link_);
    // The gateway routes by free pages: tell it as soon as they change (a reservation made or
    // freed), not only at the next heartbeat.
    if (engine_->FreePagesForNewSequences() != sent_free_pages_) SendLoad();
  };
  turn.drained = [this] { return Idle(); };
  turn.send_load = [this] { SendLoad(); };
  turn.announce_drain = [this] {
    spdlog::info("draining: finishing {} running, {} waiting and {} reserved sequences",
                 engine_->num_running(), engine_->num_waiting(), reserved_.size());
  };
  Status served =
      worker::ServeUntilDrainedOrLost(*link_, options_.heartbeat_seconds, draining_, turn);
  // What a drain left behind (none, unless a request leaked its pages).
  if (served.ok() && draining_) {
    spdlog::info("drained: {} KV pages in use", engine_->pages().used_pages());
  }
  return served;
}

void Worker::AbandonRequests() {
  const size_t requests = reserved_.size() + seq_of_request_.size();
  for (auto& [request, reservation] : reserved_) {
    ReleaseReservation(request, reservation, "the gateway was lost");
  }
  reserved_.clear();
  // Their cancelled events, at the next step, find no request and are not reported.
  for (const auto& [request, seq] : seq_of_request_) engine_->Cancel(seq);
  seq_of_request_.clear();
  request_of_seq_.clear();
  timing_.clear();
  if (requests > 0) spdlog::warn("dropped {} requests of the gateway that was lost", requests);
}

void Worker::ReleaseReservation(uint64_t request_id, Reservation& reservation, const char* why) {
  engine_->pages().Free(reservation.held);  // the prefix cache's pages it pinned
  reservation.held.clear();
  // A transfer already Done (the request ended at its first token) holds its pages until
  // taken: free them; otherwise the receiver fails the transfer and frees them.
  if (receiver_->State(request_id) == kv_transfer::TransferState::kDone) {
    if (auto pages = receiver_->TakePages(request_id); pages.ok()) engine_->pages().Free(*pages);
  } else {
    receiver_->Cancel(request_id, why);
  }
}

void Worker::DropFailedReservations() {
  for (auto it = reserved_.begin(); it != reserved_.end();) {
    const auto state = receiver_->State(it->first);
    if (state && *state != kv_transfer::TransferState::kFailed) {
      ++it;
      continue;
    }
    // Deadline or the prefill worker lost: the receiver already freed the pages it reserved.
    engine_->pages().Free(it->second.held);
    SendError(it->first,
              "the request's KV did not arrive (deadline passed or the prefill worker "
              "was lost)",
              true);
    it = reserved_.erase(it);
  }
}

bool Worker::Idle() const { return !engine_->HasWork() && reserved_.empty(); }

void Worker::Handle(proto::Envelope& m) {
  if (m.has_generate()) {
    HandleGenerate(m.generate());
  } else if (m.has_reserve()) {
    HandleReserve(m.reserve());
  } else if (m.has_kv_done()) {
    HandleKvDone(m.kv_done());
  } else if (m.has_cancel()) {
    HandleCancel(m.cancel().request_id());
  } else if (m.has_kv_resync()) {
    kv_events_.SendSnapshot(*engine_, *link_);
  }
}

void Worker::SendError(uint64_t request_id, const std::string& message, bool retryable) {
  worker::SendRequestError(*link_, request_id, message, retryable);
}

void Worker::HandleGenerate(const proto::Generate& g) {
  // Role both, or a decode worker the gateway asks to prefill a prompt itself (conditional
  // disaggregation): a preempted sequence is handed back as any of a decode worker's is.
  if (draining_) return SendError(g.request_id(), "worker is draining", true);
  if (seq_of_request_.contains(g.request_id())) {
    // A gateway bug: an error under that id would end the request already running, and a
    // second sequence under it would take its id mapping. The first keeps going.
    spdlog::warn("Generate for request {}, which is already running: ignored", g.request_id());
    return;
  }
  auto seq =
      engine_->Add({g.prompt().begin(), g.prompt().end()}, model::SamplingFromProto(g.sampling()));
  if (!seq.ok()) return SendError(g.request_id(), seq.status().message(), false);
  request_of_seq_[*seq] = g.request_id();
  seq_of_request_[g.request_id()] = *seq;
  timing_[*seq] = {Clock::now(), {}};
}

void Worker::HandleReserve(const proto::Reserve& r) {
  if (!receiver_) {
    return SendError(r.request_id(), "this worker does not receive KV (role both)", true);
  }
  if (draining_) return SendError(r.request_id(), "worker is draining", true);
  model::SamplingParams params = model::SamplingFromProto(r.sampling());
  std::vector<int32_t> prompt(r.prompt().begin(), r.prompt().end());
  if (Status s = params.Validate(); !s.ok()) return SendError(r.request_id(), s.message(), false);
  if (params.n > 1) {  // its choices start from the prompt's logits, which only a Generate has
    return SendError(r.request_id(),
                     "a request of " + std::to_string(params.n) +
                         " choices is prefilled by the worker that decodes it (Generate)",
                     false);
  }
  // The prompt's length and ids, now: a bad id found only at KvDone held its pages till then.
  if (Status s = engine_->CheckPrompt(prompt); !s.ok()) {
    return SendError(r.request_id(), s.message(), false);
  }
  // The prompt plus a lookahead; the engine grows the sequence's pages as it decodes.
  const int tokens = engine_->InitialKvTokens(static_cast<int>(prompt.size()), params.max_tokens);
  const int pages = model::PagesForTokens(tokens, engine_->backend().kv_shape().page_size);
  const auto deadline = worker::DeadlineFromGateway(r.deadline_seconds());
  if (!deadline.ok()) return SendError(r.request_id(), deadline.status().message(), false);
  const int prompt_pages = model::PagesForTokens(static_cast<int>(prompt.size()),
                                                 engine_->backend().kv_shape().page_size);
  // The prompt's leading blocks this worker's prefix cache holds are pinned, not received; at
  // least one prompt page is always sent (it holds the last prompt token's KV).
  std::vector<int32_t> held;
  if (engine_->prefix_cache()) {
    std::vector<BlockKey> keys = engine_->BlockKeys(prompt);
    keys.resize(std::min<size_t>(keys.size(), static_cast<size_t>(prompt_pages - 1)));
    held = engine_->pages().AcquirePrefix(keys);
  }
  const int held_pages = static_cast<int>(held.size());
  auto reservation =
      receiver_->Reserve(r.request_id(), pages - held_pages, *deadline, prompt_pages - held_pages);
  if (!reservation.ok()) {
    engine_->pages().Free(held);
    const bool no_room = reservation.status().code() == StatusCode::kResourceExhausted;
    return worker::SendRequestError(*link_, r.request_id(), reservation.status().message(), true,
                                    /*peer_failed=*/false, no_room);
  }
  reserved_[r.request_id()] = {std::move(prompt), std::move(params), Clock::now(), std::move(held)};
  proto::Envelope reply;
  proto::Reserved* out = reply.mutable_reserved();
  out->set_request_id(r.request_id());
  out->set_kv_endpoint(options_.kv_advertise_host + ":" + std::to_string(listener_->port()));
  out->mutable_page_ids()->Add(reservation->pages.begin(), reservation->pages.end());
  out->set_layout_hash(layout_->hash);
  out->set_cached_blocks(held_pages);
  out->set_device(engine_->backend().device());  // normalised: "cuda:0", never "cuda"
  out->set_host_id(HostIdentity());
  out->set_gpu_uuid(gpu_uuid_);
  out->set_transfer_secret(reinterpret_cast<const char*>(reservation->secret.data()),
                           reservation->secret.size());
  link_->Send(reply);
}

void Worker::HandleKvDone(const proto::KvDone& d) {
  auto it = reserved_.find(d.request_id());
  if (it == reserved_.end()) return;  // cancelled meanwhile
  Reservation r = std::move(it->second);
  reserved_.erase(it);
  // The prefill worker answered only after every chunk was acknowledged, so the transfer is
  // Done here; anything else means it failed (deadline, peer lost) and its pages are gone.
  auto received = receiver_->TakePages(d.request_id());
  if (!received.ok()) {
    receiver_->Cancel(d.request_id(), "KV incomplete at KvDone");  // frees its pages
    engine_->pages().Free(r.held);
    return SendError(d.request_id(), "KV transfer did not complete: " + received.status().message(),
                     false);
  }
  std::vector<int32_t> pages = std::move(r.held);  // the cached prefix, then what arrived
  pages.insert(pages.end(), received->begin(), received->end());
  auto seq = engine_->AddPrefilled(std::move(r.prompt), d.first_token(), pages, r.params);
  if (!seq.ok()) {
    engine_->pages().Free(pages);
    return SendError(d.request_id(), seq.status().message(), false);
  }
  request_of_seq_[*seq] = d.request_id();
  seq_of_request_[d.request_id()] = *seq;
}

void Worker::HandleCancel(uint64_t request_id) {
  if (auto r = reserved_.find(request_id); r != reserved_.end()) {
    ReleaseReservation(request_id, r->second, "cancelled by the gateway");
    reserved_.erase(r);
    proto::Envelope m;  // the gateway waits for the end of every request it sent
    m.mutable_tokens()->set_request_id(request_id);
    m.mutable_tokens()->set_finish_reason("cancelled");
    link_->Send(m);
    return;
  }
  auto it = seq_of_request_.find(request_id);
  if (it != seq_of_request_.end()) engine_->Cancel(it->second);
}

void Worker::RunStep() {
  std::vector<model::TokenEvent> events;
  model::StepStats stats;
  if (Status s = engine_->Step(&events, &stats); !s.ok()) {
    // A failed step is this worker's failure (a device error), not its requests': the gateway
    // retries them elsewhere, a bounded number of times. Those waiting for their KV go too, and
    // the worker drains and exits non-zero for its supervisor to start a fresh one.
    step_failure_.Record(s, draining_);
    for (const auto& [request, seq] : seq_of_request_) SendError(request, s.message(), true);
    for (const auto& [seq, request] : request_of_seq_) engine_->Cancel(seq);
    request_of_seq_.clear();
    seq_of_request_.clear();
    for (auto& [request, reservation] : reserved_) {
      SendError(request, s.message(), true);
      ReleaseReservation(request, reservation, "the decode worker failed");
    }
    reserved_.clear();
    return;
  }
  worker::ReportStep(
      *link_, metrics_.get(), step_log_.get(), stats,
      [&](uint64_t seq) -> uint64_t {
        auto it = request_of_seq_.find(seq);
        return it == request_of_seq_.end() ? 0 : it->second;
      },
      &busy_seconds_);
  for (uint64_t seq : stats.seq_ids) {
    auto t = timing_.find(seq);
    if (t != timing_.end() && t->second.first_step == Clock::time_point{}) {
      t->second.first_step = stats.start;
    }
  }
  worker::ReportPreemptions(*engine_, metrics_.get(), &reported_preemptions_);
  worker::ReportPrefixCache(*engine_, metrics_.get());
  for (const auto& e : events) {
    auto it = request_of_seq_.find(e.seq_id);
    if (it == request_of_seq_.end()) continue;
    if (e.finish == model::FinishReason::kPreempted) {  // its pages are free already
      worker::SendPreempted(*link_, it->second);
      seq_of_request_.erase(it->second);
      request_of_seq_.erase(it);
      timing_.erase(e.seq_id);
      continue;
    }
    proto::Envelope m;
    proto::TokenBatch* b = m.mutable_tokens();
    b->set_request_id(it->second);
    b->set_choice(e.choice);
    if (e.token >= 0) {
      b->add_tokens(e.token);
      model::AddLogprobs(e, b);
    }
    b->set_last_is_stop_token(e.is_stop_token);
    if (auto t = timing_.find(e.seq_id); t != timing_.end()) {  // the first token (role both)
      b->set_cached_tokens(e.cached_tokens);
      b->set_queue_seconds(
          std::chrono::duration<double>(t->second.first_step - t->second.arrival).count());
      b->set_prefill_seconds(Since(t->second.first_step));
      timing_.erase(t);
    }
    if (e.finish != model::FinishReason::kNone)
      b->set_finish_reason(model::FinishReasonName(e.finish));
    if (e.ends_request) {  // its last choice ended
      seq_of_request_.erase(it->second);
      request_of_seq_.erase(it);
      timing_.erase(e.seq_id);
    }
    link_->Send(m);
  }
}

void Worker::SendLoad() {
  proto::Envelope m;
  proto::Load* load = m.mutable_load();
  sent_free_pages_ = engine_->FreePagesForNewSequences();
  load->set_free_pages(sent_free_pages_);
  load->set_running(engine_->num_running());
  load->set_waiting(engine_->num_waiting() + static_cast<int>(reserved_.size()));
  load->set_draining(draining_);
  load->set_busy_seconds(busy_seconds_);
  link_->Send(m);
  if (metrics_) {
    metrics_->SetLoad(engine_->pages().used_pages(), engine_->num_running(),
                      engine_->num_waiting() + static_cast<int>(reserved_.size()));
  }
}

}  // namespace pdserve::decode_pool
