// PromptCacheFigures: a report section's prompt-cache hit rate and an estimate of what the cache
// saved, from its accepted self-hosted rows (ledger rows' cached_prompt_tokens). Part of the cost
// report (cost_report.h); pure values and functions, safe from any thread.
//
// Definitions, over accepted rows prefilled on our workers (prefill_worker.id != 0):
// - hit rate = cached prompt tokens / prompt tokens.
// - measured prefill cost per uncached prompt token = their prefill compute cost / (prompt -
//   cached tokens): a cached token's KV was not computed, so the compute the rows paid for went
//   to the uncached ones.
// - saved (an estimate) = cached tokens x that cost: what computing the cached tokens would have
//   cost at the section's own measured rate. It assumes a cached token would have cost what an
//   uncached one did (attention over a longer prefix costs more per token, so it errs low on long
//   prompts). None when every prompt token was cached (no rate to measure) or none was prompted.
// Rows of class api are left out: their cached tokens are priced by the API (the row's cost).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ledger/ledger.h"

namespace pdserve::ledger {

struct PromptCacheFigures {
  int64_t prompt_tokens = 0, cached_tokens = 0;  // accepted rows prefilled on our workers
  double prefill_usd = 0;                        // their prefill compute cost

  // Adds an accepted self-hosted row (the caller decides which rows count).
  void Add(const AttemptRow& row);
  std::optional<double> HitRate() const;
  std::optional<double> UsdPerUncachedToken() const;
  std::optional<double> SavedUsd() const;
};

// The figures as the report's JSON "prompt_cache" object (null for an undefined figure).
nlohmann::json PromptCacheJson(const PromptCacheFigures& f);
// One line of the text report: "  prompt cache    hit rate 42.0% (...), saved ~$... (estimate)".
std::string PromptCacheLine(const PromptCacheFigures& f);
// How the saving is estimated, for the report's notes.
extern const char kPromptCacheSavingNote[];

}  // namespace pdserve::ledger
