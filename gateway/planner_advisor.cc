#include "gateway/planner_advisor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <vector>

namespace pdserve::gateway {

using planner::Pool;

std::map<Pool, planner::PoolSignals> PoolSignalsFrom(std::span<const router::WorkerLoad> workers,
                                                     size_t queued, double predicted_wait_s,
                                                     double itl_s) {
  std::map<Pool, planner::PoolSignals> out;
  planner::PoolSignals& prefill = out[Pool::kPrefill];
  planner::PoolSignals& decode = out[Pool::kDecode];
  int64_t pages = 0, used = 0;
  std::vector<double> unloaded_itls;
  for (const router::WorkerLoad& w : workers) {
    if (w.draining || (w.role != "prefill" && w.role != "decode")) continue;
    planner::PoolSignals& s = w.role == "prefill" ? prefill : decode;
    const bool burst = w.capacity_class == CapacityClass::kBurst;
    (burst ? s.burst : s.reserved)++;
    if (burst) s.burst_idle_s = std::max(s.burst_idle_s, w.idle_seconds);
    if (w.role == "decode") {
      pages += w.kv_pages;
      used += w.kv_pages - w.free_pages;
      if (w.unloaded_decode_step_seconds > 0) {
        unloaded_itls.push_back(w.unloaded_decode_step_seconds);
      }
    }
  }
  for (auto& [pool, s] : out) s.queued_requests = static_cast<int>(queued);
  prefill.predicted_ttft_s = predicted_wait_s;
  decode.itl_s = itl_s;
  if (!unloaded_itls.empty()) {  // the median worker's
    auto mid = unloaded_itls.begin() + unloaded_itls.size() / 2;
    std::nth_element(unloaded_itls.begin(), mid, unloaded_itls.end());
    decode.unloaded_itl_s = *mid;
  }
  decode.kv_use = pages > 0 ? static_cast<double>(used) / static_cast<double>(pages) : 0;
  return out;
}

std::vector<std::string> DrainOrder(std::span<const router::WorkerLoad> workers, Pool pool) {
  std::vector<const router::WorkerLoad*> burst;
  for (const router::WorkerLoad& w : workers) {
    if (w.draining || w.capacity_class != CapacityClass::kBurst) continue;
    if (w.role == (pool == Pool::kPrefill ? "prefill" : "decode")) burst.push_back(&w);
  }
  std::stable_sort(burst.begin(), burst.end(),
                   [](const auto* a, const auto* b) { return a->idle_seconds > b->idle_seconds; });
  std::vector<std::string> names;
  for (const auto* w : burst) names.push_back(w->name);
  return names;
}

int StartingWorkers(int desired_burst, int registered_burst,
                    std::chrono::steady_clock::duration since_last_up,
                    std::chrono::steady_clock::duration start_timeout) {
  if (since_last_up >= start_timeout) return 0;
  return std::max(0, desired_burst - registered_burst);
}

PlannerAdvisor::PlannerAdvisor(PlannerAdvisorOptions options,
                               std::shared_ptr<router::WorkerRegistry> registry,
                               std::shared_ptr<router::AdmissionQueue> queue,
                               std::shared_ptr<GatewayMetrics> metrics,
                               std::shared_ptr<BurstAsks> asks)
    : registry_(std::move(registry)),
      queue_(std::move(queue)),
      metrics_(std::move(metrics)),
      planner_(options.planner,
               {{Pool::kPrefill, options.prefill}, {Pool::kDecode, options.decode}}),
      start_timeout_(options.start_timeout),
      asks_(std::move(asks)),
      mode_(options.actuator && !options.advise ? "act" : "advise"),
      actuator_(options.actuator),
      advise_only_(options.advise),
      may_act_(options.may_act) {
  spdlog::info("planner ({}): TTFT target {:.2f} s, ITL target {:.3f} s", mode_,
               options.planner.ttft_slo_s, options.planner.itl_slo_s);
  if (options.actuator) {
    spdlog::info("planner ({}): burst workers through {}{}", mode_, options.actuator->Describe(),
                 may_act_ ? ", while this gateway leads" : "");
    if (!may_act_) StartActuation();
  }
  for (Pool pool : {Pool::kPrefill, Pool::kDecode}) ExportDesired(pool);
}

void PlannerAdvisor::StartActuation() {
  planner::ActuationLoopOptions loop;
  loop.on_result = [metrics = metrics_](Pool pool, int, const Status& s) {
    metrics->RecordPlannerActuation(planner::PoolName(pool), s.ok());
  };
  actuation_ = std::make_unique<planner::ActuationLoop>(actuator_, std::move(loop));
}

void PlannerAdvisor::ExportDesired(Pool pool) {
  const planner::Desired d = planner_.desired(pool);
  metrics_->SetPlannerDesired(planner::PoolName(pool), CapacityClass::kReserved, d.reserved);
  metrics_->SetPlannerDesired(planner::PoolName(pool), CapacityClass::kBurst, d.burst);
}

void PlannerAdvisor::Tick(planner::Planner::Clock::time_point now) {
  if (actuator_ && may_act_ && !advise_only_) {
    const bool leads = may_act_();
    if (leads && !actuation_) {
      spdlog::info("planner (act): this gateway leads; acting through {}", actuator_->Describe());
      StartActuation();
    } else if (!leads && actuation_) {
      spdlog::warn("planner (act): this gateway no longer leads; advising only");
      actuation_.reset();  // an apply in progress ends first; nothing more is applied
    }
  }
  const auto snapshot = registry_->LoadSnapshot();
  router::AdmissionRequest arriving;  // a request arriving now, its own prompt aside
  const double wait = queue_->PredictWait(arriving);
  auto signals = PoolSignalsFrom(snapshot, queue_->waiting(), wait, metrics_->RecentInterToken());
  // Admission's refusals (with the requests it sent to an external upstream instead) and starts
  // over the last refusal window: one tick's are too few to tell a burst of arrivals from a load
  // the pool cannot carry.
  counts_.push_back(
      {now, metrics_->Rejected("predicted_wait") + static_cast<double>(metrics_->Overflowed()),
       metrics_->Started(), metrics_->StartedPromptTokens()});
  while (counts_.size() > 1 && now - counts_[1].at >= kRefusalWindow) counts_.pop_front();
  const Counts& first = counts_.front();
  const Counts& last = counts_.back();
  planner::PoolSignals& prefill = signals[Pool::kPrefill];
  // Refusals count from when the prefill pool last grew: those made before its newest worker
  // came are evidence about a smaller pool, and counted again would add a worker a cooldown.
  const int prefill_size = prefill.reserved + prefill.burst;
  if (prefill_size > prefill_size_) prefill_grew_ = last;
  prefill_size_ = prefill_size;
  const Counts& from = prefill_grew_ && prefill_grew_->at > first.at ? *prefill_grew_ : first;
  prefill.refused_requests = static_cast<int>(last.refused - from.refused);
  prefill.started_requests = static_cast<int>(last.started - from.started);
  // The prompt tokens started a second over the window, against what the pool prefills a second.
  const double window = std::chrono::duration<double>(last.at - first.at).count();
  const double capacity = registry_->Prefill().tokens_per_second;
  if (window >= 1 && capacity > 0) {
    prefill.utilisation =
        static_cast<double>(last.prompt_tokens - first.prompt_tokens) / window / capacity;
  }
  for (auto& [pool, s] : signals) {
    auto up = last_up_.find(pool);
    if (up == last_up_.end()) continue;
    s.starting =
        StartingWorkers(planner_.desired(pool).burst, s.burst, now - up->second, start_timeout_);
  }
  for (const planner::Decision& d : planner_.Decide(now, signals)) {
    if (d.delta > 0) last_up_[d.pool] = now;
    for (int i = 0; asks_ && i < d.delta; ++i) {
      asks_->Asked(d.pool, std::chrono::system_clock::now());
    }
    if (asks_ && d.delta < 0) asks_->Withdrawn(d.pool);
    const char* pool = planner::PoolName(d.pool);
    spdlog::info("planner ({}): {} {:+d} {} worker(s): {}; desired now {} reserved, {} burst",
                 mode_, pool, d.delta, ToString(d.capacity_class), d.reason,
                 planner_.desired(d.pool).reserved, planner_.desired(d.pool).burst);
    metrics_->RecordPlannerDecision(pool, d.delta > 0 ? "up" : "down", d.cause);
    ExportDesired(d.pool);
  }
  for (const auto& [pool, s] : signals) {
    const int desired_burst = planner_.desired(pool).burst;
    if (asks_) asks_->KeepAtMost(pool, desired_burst - s.burst);
    if (actuation_) actuation_->Want(pool, desired_burst, DrainOrder(snapshot, pool));
  }
}

}  // namespace pdserve::gateway
