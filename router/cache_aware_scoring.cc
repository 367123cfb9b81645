#include "router/cache_aware_scoring.h"

#include <algorithm>

namespace pdserve::router {

int64_t UncachedTokens(int prompt_tokens, int matched_blocks, int page_size) {
  const int64_t cached = int64_t{std::max(0, matched_blocks)} * std::max(1, page_size);
  return std::max<int64_t>(1, prompt_tokens - cached);
}

PrefillEstimate PredictPrefill(const PrefillCandidate& c, const PrefillJob& job,
                               double tokens_per_second) {
  const int64_t uncached = UncachedTokens(job.prompt_tokens, c.matched_blocks, job.page_size);
  return {static_cast<double>(std::max<int64_t>(0, c.queued_prompt_tokens)) / tokens_per_second,
          static_cast<double>(uncached) / tokens_per_second};
}

double PrefillRate(const PrefillCandidate& c, std::span<const PrefillCandidate> candidates,
                   const PrefillJob& job) {
  if (c.tokens_per_second > 0) return c.tokens_per_second;
  if (job.default_tokens_per_second > 0) return job.default_tokens_per_second;
  const double mean = MeanMeasuredRate(candidates);
  return mean > 0 ? mean : 1.0;
}

double MeanMeasuredRate(std::span<const PrefillCandidate> candidates) {
  double sum = 0;
  int measured = 0;
  for (const PrefillCandidate& c : candidates) {
    if (c.tokens_per_second > 0) {
      sum += c.tokens_per_second;
      ++measured;
    }
  }
  return measured > 0 ? sum / measured : 0;
}

std::optional<size_t> PickPrefill(std::span<const PrefillCandidate> candidates,
                                  const PrefillJob& job) {
  // The best by score over the candidates `admit` lets in.
  auto best_of = [&](auto admit) {
    std::optional<size_t> best;
    double best_score = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const PrefillCandidate& c = candidates[i];
      if (!admit(c)) continue;
      const PrefillEstimate e = PredictPrefill(c, job, PrefillRate(c, candidates, job));
      const double score =
          e.queue_seconds + (1 + std::max(0.0, job.work_weight)) * e.compute_seconds;
      if (!best || score < best_score ||
          (score == best_score && c.matched_blocks > candidates[*best].matched_blocks)) {
        best = i;
        best_score = score;
      }
    }
    return best;
  };
  const std::optional<size_t> best = best_of([](const PrefillCandidate&) { return true; });
  if (!best || candidates[*best].has_room) return best;
  const PrefillCandidate& b = candidates[*best];
  int least_matched = b.matched_blocks;
  for (const PrefillCandidate& c : candidates)
    least_matched = std::min(least_matched, c.matched_blocks);
  if (b.matched_blocks > least_matched &&
      b.queued_prompt_tokens + UncachedTokens(job.prompt_tokens, b.matched_blocks, job.page_size) <=
          b.queue_limit_tokens) {
    return best;
  }
  return best_of([](const PrefillCandidate& c) { return c.has_room; });
}

double DecodeCost(const DecodeCandidate& c, const DecodeJob& job) {
  const int missing = std::max(0, job.prompt_blocks - std::max(0, c.matched_blocks));
  return missing * job.seconds_per_block_sent +
         std::max(0, c.running) * job.seconds_per_running_sequence;
}

std::optional<size_t> PickDecode(std::span<const DecodeCandidate> candidates,
                                 const DecodeJob& job) {
  std::optional<size_t> best;
  double best_cost = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double cost = DecodeCost(candidates[i], job);
    if (!best || cost < best_cost ||
        (cost == best_cost && candidates[i].free_pages > candidates[*best].free_pages)) {
      best = i;
      best_cost = cost;
    }
  }
  return best;
}

PrefillCandidate PrefillCandidateOf(const WorkerLoad& w, int matched_blocks,
                                    double tokens_per_second) {
  return {.worker = w.id,
          .matched_blocks = matched_blocks,
          .tokens_per_second = tokens_per_second,
          .queued_prompt_tokens = w.sent_prompt_tokens};
}

DecodeCandidate DecodeCandidateOf(const WorkerLoad& w, int matched_blocks) {
  return {.worker = w.id,
          .matched_blocks = matched_blocks,
          .free_pages = w.free_pages - w.pending_pages,
          .running = std::max(w.running, w.attempts)};
}

Placement ChoosePlacement(const PlacementInputs& in, const PlacementOptions& options) {
  Placement p;
  p.pair_seconds = in.pair.ttft_seconds() + in.transfer_seconds;
  if (in.local_tokens_per_second > 0) {
    p.local_seconds = (in.local_queue_seconds +
                       static_cast<double>(in.uncached_tokens) / in.local_tokens_per_second) *
                      options.local_slowdown;
  }
  if (in.local_tokens_per_second > 0) {
    p.local = p.local_seconds < p.pair_seconds;
    p.reason = p.local ? "local_faster" : "pair_faster";
  } else {
    // Nothing to predict local prefill from: only a short part goes local.
    p.local = in.uncached_tokens <= options.short_uncached_tokens;
    p.reason = p.local ? "short_uncached" : "pair_faster";
  }
  return p;
}

}  // namespace pdserve::router
