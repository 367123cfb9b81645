// PriceSheet: what external model APIs charge per token, read from a file in the format of
// LiteLLM's model_prices_and_context_window.json (a JSON object of model name -> {
// "input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost",
// "litellm_provider", ...}), so a user can pass LiteLLM's own file. A prompt token the API read
// from its prompt cache costs cache_read_input_token_cost; an entry without it charges cached
// input at the full input price. `pdserve report` loads one to compare self-hosting with each API.
//
// Entries without both costs (LiteLLM's "sample_spec", image or audio models) are skipped; a
// cost that is present but not a non-negative number is an error naming the file and entry.
// Immutable once loaded: safe to share between threads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace pdserve::ledger {

struct ApiPrice {
  std::string name;                  // the sheet's key, e.g. "gpt-4o-mini"
  std::string provider;              // litellm_provider, "" when absent
  double input_cost_per_token = 0;   // USD
  double output_cost_per_token = 0;  // USD
  // USD per prompt token read from the API's prompt cache (LiteLLM's
  // cache_read_input_token_cost); unset when the sheet gives none.
  std::optional<double> cache_read_cost_per_token;
  // What a cached prompt token costs: the cache-read price, else the full input price.
  double cached_input_cost_per_token() const {
    return cache_read_cost_per_token.value_or(input_cost_per_token);
  }
};

class PriceSheet {
 public:
  // Reads and validates `path`; errors name the file (and the entry).
  static Result<PriceSheet> Load(const std::string& path);
  // The same from text already read; `source` names it in errors.
  static Result<PriceSheet> Parse(const std::string& text, const std::string& source);

  // All priced entries, sorted by name.
  const std::vector<ApiPrice>& prices() const { return prices_; }
  // The named entries in the given order (all when `names` is empty); NotFound for a name the
  // sheet does not price.
  Result<std::vector<ApiPrice>> Select(const std::vector<std::string>& names) const;

 private:
  std::string source_;
  std::vector<ApiPrice> prices_;
};

}  // namespace pdserve::ledger
