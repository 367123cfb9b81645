#include "prefill_pool/prefill_worker.h"

#include "common/host_identity.h"
#include "kv_transfer/device_payload.h"
#include "kv_transfer/paced_transport.h"
#include "model/sampling_proto.h"
#include "worker/messages.h"
#include "worker/serve_loop.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace pdserve::prefill_pool {

namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

Result<std::unique_ptr<PrefillWorker>> PrefillWorker::Create(const PrefillWorkerOptions& options) {
  PDSERVE_RETURN_IF_ERROR(options.Validate());
  PDSERVE_ASSIGN_OR_RETURN(const kv_transfer::PayloadPath path,
                           kv_transfer::ChoosePayloadPath(options.kv_path, options.engine.device));
  // The prefix cache's salt: the KV layout hash this worker registers.
  auto layout_hash = [](const model::ModelConfig& config,
                        const model::KvCacheShape& shape) -> Result<uint64_t> {
    PDSERVE_ASSIGN_OR_RETURN(
        auto layout, kv_transfer::KvLayout::FromConfig(config, shape.page_size, shape.dtype));
    return layout.hash;
  };
  PDSERVE_ASSIGN_OR_RETURN(
      auto engine, worker::LoadWorkerEngine(options.model_dir, options.engine, layout_hash));
  const model::KvCacheShape& shape = engine->backend().kv_shape();
  PDSERVE_ASSIGN_OR_RETURN(auto layout, kv_transfer::KvLayout::FromConfig(
                                            engine->config(), shape.page_size, shape.dtype));
  auto worker = std::unique_ptr<PrefillWorker>(
      new PrefillWorker(options, std::move(engine), std::move(layout)));
  worker->kv_path_ = path;
  if (path != kv_transfer::PayloadPath::kTcp) {
    PDSERVE_ASSIGN_OR_RETURN(worker->kv_device_, model::ParseCudaDevice(options.engine.device));
  }
  PDSERVE_ASSIGN_OR_RETURN(worker->gpu_uuid_,
                           worker::GpuUuidOf(worker->engine_->backend().device()));
  PDSERVE_ASSIGN_OR_RETURN(worker->metrics_, worker::StartWorkerMetrics(options, "prefill"));
  PDSERVE_ASSIGN_OR_RETURN(worker->step_log_, worker::OpenStepLog(options));
  return worker;
}

PrefillWorker::PrefillWorker(const PrefillWorkerOptions& options,
                             std::unique_ptr<model::Engine> engine, kv_transfer::KvLayout layout)
    : options_(options), engine_(std::move(engine)), layout_(std::move(layout)) {
  engine_->set_layer_hook(
      [this](int layer, std::span<const model::PromptDone> done) { OnLayer(layer, done); });
  finisher_ = std::thread([this] { FinishLoop(); });
}

PrefillWorker::~PrefillWorker() {
  {
    std::lock_guard lock(finish_mu_);
    stop_finisher_ = true;
    finish_cv_.notify_all();
  }
  finisher_.join();
  transports_.clear();  // transports close before the engine's KV pool goes
  link_.reset();
}

void PrefillWorker::Drain() {
  draining_ = true;
  if (link_) link_->Wake();
}

Status PrefillWorker::Run() {
  proto::Register r = worker::RegisterFor("prefill", *engine_, options_.identity);
  r.set_layout_hash(layout_.hash);
  // Always: with its prefix cache off it publishes that it holds nothing (an empty snapshot),
  // where a worker publishing nothing would be matched by where its prompts went.
  r.set_kv_events(true);
  Status served = worker::ConnectAndServe(
      options_.gateway, r, options_.gateway_reconnect_seconds, &link_, [this] { return Serve(); },
      [this] { AbandonRequests(); }, [this] { return draining_.load(); });
  return step_failure_.Or(std::move(served));
}

Status PrefillWorker::Serve() {
  kv_events_.Restart();  // a new registration: the gateway asks for a snapshot first
  worker::ServeTurn turn;
  turn.handle = [this](proto::Envelope& m) {
    if (m.has_prefill()) HandlePrefill(m.prefill());
    if (m.has_cancel()) HandleCancel(m.cancel().request_id());
    if (m.has_kv_resync()) kv_events_.SendSnapshot(*engine_, *link_);
  };
  turn.busy = [this] { return engine_->HasWork(); };
  turn.work = [this] {
    if (engine_->HasWork()) RunStep();
    kv_events_.SendEvents(*engine_, *link_);
  };
  turn.drained = [this] {
    if (engine_->HasWork()) return false;
    std::lock_guard lock(finish_mu_);
    return finishing_.empty() && in_transfer_.empty() && !finisher_busy_;
  };
  turn.send_load = [this] { SendLoad(); };
  turn.announce_drain = [this] { spdlog::info("draining: finishing {} prompts", pending_.size()); };
  Status served =
      worker::ServeUntilDrainedOrLost(*link_, options_.heartbeat_seconds, draining_, turn);
  // What a drain left behind (none, unless a request leaked its pages).
  if (served.ok() && draining_) {
    spdlog::info("drained: {} KV pages in use", engine_->pages().used_pages());
  }
  return served;
}

void PrefillWorker::AbandonRequests() {
  size_t requests = pending_.size();
  for (auto& [seq, p] : pending_) {
    DropTransfer(p, "the gateway was lost");
    engine_->Cancel(seq);  // its cancelled event finds no prompt and is not reported
  }
  pending_.clear();
  seq_of_request_.clear();
  std::unique_lock lock(finish_mu_);
  requests += finishing_.size() + (finisher_busy_ ? 1 : 0);
  for (auto& [request, transport] : in_transfer_)
    transport->Cancel(request, "the gateway was lost");
  // The finisher's answers go to the lost connection, which drops them. Cancelled transfers
  // end at once; the bound is for a transport that would not.
  if (!finish_cv_.wait_for(lock, std::chrono::seconds(30), [&] {
        return finishing_.empty() && in_transfer_.empty() && !finisher_busy_;
      })) {
    spdlog::error("{} KV transfers of the lost gateway's prompts did not end within 30 s",
                  in_transfer_.size() + finishing_.size());
  }
  if (requests > 0) spdlog::warn("dropped {} prompts of the gateway that was lost", requests);
}

void PrefillWorker::DropTransfer(Pending& p, const char* why) {
  if (!p.opened) return;
  p.transport->Cancel(p.request_id, why);
  (void)p.transport->Wait(p.request_id);  // Failed: at once, and the transport forgets it
  p.opened = false;
  std::lock_guard lock(finish_mu_);
  in_transfer_.erase(p.request_id);
}

void PrefillWorker::SendError(uint64_t request_id, const std::string& message, bool retryable,
                              bool peer_failed) {
  worker::SendRequestError(*link_, request_id, message, retryable, peer_failed);
}

double PrefillWorker::PageLayerBytes() const {
  if (const model::SimulatedKv* sim = engine_->backend().simulated_kv()) {
    return sim->bytes_per_token_layer * layout_.page_size;
  }
  return static_cast<double>(layout_.page_bytes());
}

int64_t PrefillWorker::KvBytes(int prompt_len, int cached_blocks) const {
  const int64_t pages = model::PagesForTokens(prompt_len, layout_.page_size) - cached_blocks;
  return static_cast<int64_t>(PageLayerBytes() * static_cast<double>(pages * layout_.n_layers));
}

Result<std::shared_ptr<kv_transfer::Transport>> PrefillWorker::TransportTo(
    const proto::Reserved& dst) {
  const std::string& endpoint = dst.kv_endpoint();
  auto it = transports_.find(endpoint);
  if (it != transports_.end() && it->second->connected()) return it->second;
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) {
    return InvalidArgument("bad KV endpoint '" + endpoint + "' (want host:port)");
  }
  kv_transfer::TcpTransportOptions o;
  o.host = endpoint.substr(0, colon);
  const int port = std::atoi(endpoint.c_str() + colon + 1);
  if (port <= 0 || port > 65535)
    return InvalidArgument("bad KV endpoint port in '" + endpoint + "'");
  o.port = static_cast<uint16_t>(port);
  // On a GPU, "auto" is decided per decode worker: CUDA IPC to one on this GPU, else NCCL.
  const bool per_peer = options_.kv_path == "auto" && kv_path_ != kv_transfer::PayloadPath::kTcp;
  // The backend's name for its device ("cuda:0"), as the decode worker sends its own: the two
  // flags as typed may differ ("cuda" against "cuda:0") for the same GPU.
  const std::string self_device = engine_->backend().device();
  o.path = per_peer ? kv_transfer::GpuPathTo({self_device, HostIdentity(), gpu_uuid_},
                                             {dst.device(), dst.host_id(), dst.gpu_uuid()})
                    : kv_path_;
  o.device = kv_device_;
  o.congestion_control = options_.kv_tcp_congestion;
  o.splice_min_layer_bytes = options_.kv_splice_min_bytes;
  o.splice_max_layer_bytes = options_.kv_splice_max_bytes;
  o.offload_checksums = options_.kv_offload_checksums;
  const auto now = std::chrono::steady_clock::now();
  if (auto failed = unreachable_.FailedRecently(endpoint, now)) {
    return Unavailable(
        fmt::format("the last attempt, {} ms ago, failed; not dialled again yet",
                    std::chrono::duration_cast<std::chrono::milliseconds>(now - *failed).count()));
  }
  std::vector<const void*> bases;
  for (int l = 0; l < layout_.n_layers; ++l) bases.push_back(engine_->backend().KvLayerData(l));
  auto dial = [&]() -> Result<std::unique_ptr<kv_transfer::Transport>> {
    const int pages = engine_->pages().num_pages();
    if (options_.dial_transport)
      return options_.dial_transport(layout_, std::move(bases), pages, o);
    PDSERVE_ASSIGN_OR_RETURN(
        auto tcp, kv_transfer::TcpTransport::Connect(layout_, std::move(bases), pages, o));
    return std::unique_ptr<kv_transfer::Transport>(std::move(tcp));
  };
  auto transport = dial();
  if (const model::SimulatedKv* sim = engine_->backend().simulated_kv(); sim && transport.ok()) {
    // Simulated KV moves as small pages; the link takes as long as the real bytes would.
    kv_transfer::PacedLink link;
    link.bytes_per_page_layer = PageLayerBytes();
    link.bytes_per_second = sim->bytes_per_second;
    transport = std::unique_ptr<kv_transfer::Transport>(
        std::make_unique<kv_transfer::PacedTransport>(std::move(*transport), link));
  }
  if (!transport.ok()) {
    unreachable_.Failed(endpoint, std::chrono::steady_clock::now());
    return transport.status();
  }
  unreachable_.Succeeded(endpoint);
  std::shared_ptr<kv_transfer::Transport> shared = std::move(*transport);
  transports_[endpoint] = shared;
  spdlog::info("KV transport to {} connected ({})", endpoint, kv_transfer::PayloadPathName(o.path));
  return shared;
}

void PrefillWorker::HandlePrefill(const proto::Prefill& p) {
  if (draining_) return SendError(p.request_id(), "worker is draining", true);
  const auto deadline = worker::DeadlineFromGateway(p.deadline_seconds());
  if (!deadline.ok()) return SendError(p.request_id(), deadline.status().message(), false);
  const proto::Reserved& dst = p.destination();
  if (dst.transfer_secret().size() != kv_transfer::kTransferSecretBytes) {
    return SendError(p.request_id(),
                     "the decode worker's reservation carries no transfer secret (an older "
                     "decode worker?)",
                     true, true);
  }
  if (dst.layout_hash() != layout_.hash) {
    return SendError(p.request_id(),
                     "the decode worker's KV layout differs from this prefill worker's (" +
                         layout_.ToString() + ")",
                     true, true);
  }
  auto transport = TransportTo(dst);
  if (!transport.ok()) {
    return SendError(p.request_id(),
                     "cannot reach the decode worker's KV endpoint " + dst.kv_endpoint() + ": " +
                         transport.status().message(),
                     true, true);
  }
  model::SamplingParams params = model::SamplingFromProto(p.sampling());
  const int max_tokens = params.max_tokens;
  params.max_tokens = 1;  // this worker samples the first token only
  std::vector<int32_t> prompt(p.prompt().begin(), p.prompt().end());
  const int prompt_len = static_cast<int>(prompt.size());
  const int prompt_pages = model::PagesForTokens(prompt_len, layout_.page_size);
  // The decode worker holds the prompt's first cached_blocks pages: the rest are sent.
  const int cached_blocks = dst.cached_blocks();
  if (cached_blocks < 0 || cached_blocks >= prompt_pages) {
    return SendError(p.request_id(),
                     fmt::format("the decode worker says it holds {} of the prompt's {} KV "
                                 "pages (want 0 to {})",
                                 cached_blocks, prompt_pages, prompt_pages - 1),
                     false);
  }
  const int pages_needed = prompt_pages - cached_blocks;
  if (dst.page_ids_size() < pages_needed) {
    return SendError(p.request_id(),
                     "the decode worker reserved " + std::to_string(dst.page_ids_size()) +
                         " pages for a prompt that needs " + std::to_string(pages_needed) + " sent",
                     false);
  }
  auto seq = engine_->Add(std::move(prompt), params, /*keep_pages=*/true);
  if (!seq.ok()) return SendError(p.request_id(), seq.status().message(), false);
  Pending pending;
  pending.request_id = p.request_id();
  pending.destination = dst;
  pending.max_tokens = max_tokens;
  pending.prompt_len = prompt_len;
  pending.arrival = Clock::now();
  pending.deadline = *deadline;
  pending.transport = *transport;
  pending_[*seq] = std::move(pending);
  seq_of_request_[p.request_id()] = *seq;
}

void PrefillWorker::HandleCancel(uint64_t request_id) {
  auto it = seq_of_request_.find(request_id);
  if (it != seq_of_request_.end()) {
    engine_->Cancel(it->second);  // its cancelled event answers the gateway
    return;
  }
  std::lock_guard lock(finish_mu_);
  if (auto t = in_transfer_.find(request_id); t != in_transfer_.end()) {
    t->second->Cancel(request_id, "cancelled by the gateway");  // the finisher answers
  }
}

void PrefillWorker::OnLayer(int layer, std::span<const model::PromptDone> done) {
  for (const model::PromptDone& d : done) {
    auto it = pending_.find(d.seq_id);
    if (it == pending_.end()) continue;
    Pending& p = it->second;
    if (!p.failed.ok()) continue;
    if (layer == 0) {
      // Pages [k, n) of the prompt go to the decode worker's page_ids [0, n - k): it holds the
      // first k (HandlePrefill checked 0 <= k < n and the page ids' count).
      const int n = model::PagesForTokens(d.prompt_len, layout_.page_size);
      const int k = p.destination.cached_blocks();
      kv_transfer::OutgoingRequest out;
      out.request_id = p.request_id;
      out.src_pages.assign(d.pages.begin() + k, d.pages.begin() + n);
      out.dst_pages.assign(p.destination.page_ids().begin(),
                           p.destination.page_ids().begin() + (n - k));
      out.deadline = p.deadline;
      std::memcpy(out.secret.data(), p.destination.transfer_secret().data(), out.secret.size());
      p.failed = p.transport->Open(out);
      p.opened = p.failed.ok();
      {
        std::lock_guard lock(finish_mu_);
        if (p.opened) in_transfer_[p.request_id] = p.transport;
      }
      if (!p.failed.ok()) continue;
    }
    p.failed = p.transport->PushLayer(p.request_id, layer);
  }
  if (options_.debug_layer_delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.debug_layer_delay_ms));
  }
}

void PrefillWorker::RunStep() {
  std::vector<model::TokenEvent> events;
  model::StepStats stats;
  if (Status s = engine_->Step(&events, &stats); !s.ok()) {
    // A failed step is this worker's failure (a device error), not its requests': the gateway
    // retries them elsewhere, a bounded number of times, and the worker drains and exits
    // non-zero for its supervisor to start a fresh one.
    step_failure_.Record(s, draining_);
    for (auto& [seq, p] : pending_) {
      SendError(p.request_id, s.message(), true);
      DropTransfer(p, "prefill failed");
      engine_->Cancel(seq);
    }
    pending_.clear();
    seq_of_request_.clear();
    return;
  }
  // Its engine runs prompts only (max_tokens 1), so every part of a step is prompt work.
  worker::ReportStep(
      *link_, metrics_.get(), step_log_.get(), stats,
      [&](uint64_t seq) -> uint64_t {
        auto it = pending_.find(seq);
        return it == pending_.end() ? 0 : it->second.request_id;
      },
      &busy_seconds_);
  worker::ReportPrefixCache(*engine_, metrics_.get());
  // The step's report goes out before the finishing thread can send its requests' first tokens:
  // the gateway charges a request the steps reported before its end.
  link_->FlushSends();
  for (uint64_t seq : stats.seq_ids) {
    auto it = pending_.find(seq);
    if (it != pending_.end() && it->second.first_step == Clock::time_point{}) {
      it->second.first_step = stats.start;
    }
  }
  for (const auto& e : events) {
    auto it = pending_.find(e.seq_id);
    if (it == pending_.end()) continue;
    Pending p = std::move(it->second);
    pending_.erase(it);
    seq_of_request_.erase(p.request_id);
    if (e.finish == model::FinishReason::kCancelled) {
      DropTransfer(p, "cancelled by the gateway");  // the decode worker hears from the gateway
      proto::Envelope m;
      m.mutable_tokens()->set_request_id(p.request_id);
      m.mutable_tokens()->set_finish_reason("cancelled");
      link_->Send(m);
      continue;
    }
    Finishing f;
    f.pending = std::move(p);
    f.token = e.token;
    f.is_stop = e.is_stop_token;
    f.event = e;
    f.cached_tokens = e.cached_tokens;
    f.pages = engine_->TakeKeptPages(e.seq_id);
    f.sampled = Clock::now();
    std::lock_guard lock(finish_mu_);
    finishing_.push_back(std::move(f));
    finish_cv_.notify_all();
  }
}

void PrefillWorker::FinishLoop() {
  while (true) {
    Finishing f;
    {
      std::unique_lock lock(finish_mu_);
      finish_cv_.wait(lock, [&] { return stop_finisher_ || !finishing_.empty(); });
      if (finishing_.empty()) return;
      f = std::move(finishing_.front());
      finishing_.pop_front();
      finisher_busy_ = true;
    }
    const Pending& p = f.pending;
    Status transferred = p.failed;
    if (transferred.ok()) transferred = p.transport->Wait(p.request_id);
    const double transfer_seconds = Seconds(Clock::now() - f.sampled);
    engine_->pages().Free(f.pages);  // the pool is thread-safe
    {
      std::lock_guard lock(finish_mu_);
      in_transfer_.erase(p.request_id);
    }
    if (!transferred.ok()) {
      // Unavailable: the decode worker's connection went; Cancelled: the gateway asked.
      SendError(p.request_id, "KV transfer to the decode worker failed: " + transferred.message(),
                true, transferred.code() == StatusCode::kUnavailable);
      FinishedOne();
      continue;
    }
    const int64_t kv_bytes = KvBytes(p.prompt_len, p.destination.cached_blocks());
    if (metrics_) metrics_->AddKvTransfer(kv_bytes, transfer_seconds);
    proto::Envelope m;
    proto::TokenBatch* b = m.mutable_tokens();
    b->set_request_id(p.request_id);
    b->add_tokens(f.token);
    model::AddLogprobs(f.event, b);
    b->set_last_is_stop_token(f.is_stop);
    b->set_queue_seconds(Seconds(p.first_step - p.arrival));
    b->set_prefill_seconds(Seconds(f.sampled - p.first_step));
    b->set_transfer_seconds(transfer_seconds);
    b->set_kv_bytes(kv_bytes);
    b->set_cached_tokens(f.cached_tokens);
    const bool context_full = p.prompt_len + 1 >= engine_->config().max_seq_len;
    if (f.event.finish == model::FinishReason::kStop) {  // a stop token, or a whole value
      b->set_finish_reason("stop");
    } else if (p.max_tokens <= 1 || context_full) {
      b->set_finish_reason("length");
    }
    link_->Send(m);
    FinishedOne();
  }
}

void PrefillWorker::FinishedOne() {
  {
    std::lock_guard lock(finish_mu_);
    finisher_busy_ = false;
  }
  finish_cv_.notify_all();   // AbandonRequests may wait for this
  if (link_) link_->Wake();  // and a draining engine loop
}

int64_t PrefillWorker::QueuedPromptTokens() const {
  int64_t tokens = 0;
  for (const auto& [seq, p] : pending_) tokens += p.prompt_len;
  return tokens;
}

void PrefillWorker::SendLoad() {
  proto::Envelope m;
  proto::Load* load = m.mutable_load();
  load->set_free_pages(engine_->pages().free_pages());
  load->set_running(engine_->num_running());
  load->set_waiting(engine_->num_waiting());
  load->set_queued_prompt_tokens(QueuedPromptTokens());
  load->set_draining(draining_);
  load->set_busy_seconds(busy_seconds_);
  link_->Send(m);
  if (metrics_) {
    metrics_->SetLoad(engine_->pages().used_pages(), engine_->num_running(),
                      engine_->num_waiting());
  }
}

}  // namespace pdserve::prefill_pool
