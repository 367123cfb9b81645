// A section's prompt-cache figures; see prompt_cache_figures.h.
#include "ledger/prompt_cache_figures.h"

#include <fmt/format.h>

#include <algorithm>

namespace pdserve::ledger {

const char kPromptCacheSavingNote[] =
    "prompt_cache.saved_usd is an estimate: cached prompt tokens x the section's measured "
    "prefill compute cost per uncached prompt token (prefill_compute_usd / (prompt - cached "
    "tokens) of accepted self-hosted rows)";

void PromptCacheFigures::Add(const AttemptRow& row) {
  prompt_tokens += row.prompt_tokens;
  cached_tokens += std::clamp<int64_t>(row.cached_prompt_tokens, 0, row.prompt_tokens);
  prefill_usd += row.cost.prefill_compute_usd;
}

std::optional<double> PromptCacheFigures::HitRate() const {
  if (prompt_tokens <= 0) return std::nullopt;
  return static_cast<double>(cached_tokens) / static_cast<double>(prompt_tokens);
}

std::optional<double> PromptCacheFigures::UsdPerUncachedToken() const {
  const int64_t uncached = prompt_tokens - cached_tokens;
  if (uncached <= 0) return std::nullopt;
  return prefill_usd / static_cast<double>(uncached);
}

std::optional<double> PromptCacheFigures::SavedUsd() const {
  const std::optional<double> rate = UsdPerUncachedToken();
  if (!rate) return std::nullopt;
  return static_cast<double>(cached_tokens) * *rate;
}

namespace {
nlohmann::json Optional(std::optional<double> v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
}  // namespace

nlohmann::json PromptCacheJson(const PromptCacheFigures& f) {
  return {{"prompt_tokens", f.prompt_tokens},
          {"cached_prompt_tokens", f.cached_tokens},
          {"hit_rate", Optional(f.HitRate())},
          {"prefill_usd_per_uncached_token", Optional(f.UsdPerUncachedToken())},
          {"saved_usd", Optional(f.SavedUsd())},
          {"saved_usd_is_estimate", true}};
}

std::string PromptCacheLine(const PromptCacheFigures& f) {
  const std::optional<double> rate = f.HitRate(), saved = f.SavedUsd();
  return fmt::format("  prompt cache    hit rate {} ({} of {} prompt tokens), saved {}\n",
                     rate ? fmt::format("{:.1f}%", *rate * 100) : std::string("-"), f.cached_tokens,
                     f.prompt_tokens,
                     saved ? fmt::format("~${:.6f} (estimate at the measured prefill cost per "
                                         "uncached token)",
                                         *saved)
                           : std::string("-"));
}

}  // namespace pdserve::ledger
