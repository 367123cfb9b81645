// External upstreams: OpenAI-compatible model APIs registered with the gateway as a pool of
// class `api` (docs/architecture.md, "External APIs"). A tenant whose overflow rule allows it
// sends a request to one when admission predicts that self-hosted workers would miss its TTFT
// objective. This file holds what the router decides with: each upstream's configuration (URL,
// the model it is asked for, its key, its price per token), its health, and which upstream a
// request may use now. The HTTP(S) proxying is the gateway's (gateway/external_call.h).
//
// Health: an upstream that failed more than half of its requests in the last `window` (and at
// least `min_requests` of them) cools down for `cooldown`: nothing is sent to it, and then it is
// tried afresh (its window forgotten).
//
// Prompt caches: an API keeps the prompts it was sent lately and bills the part of a new prompt
// it held at its cached-input price. The gateway cannot see that cache, so it keeps its own
// record per upstream of the prompts it sent there (Sent: their 16-token blocks, believed held
// for `prompt_cache_ttl` after the last send, router/routed_prefixes.h) and predicts a prompt's
// cached part as the leading blocks recorded (our tokens standing for the API's). Pick and
// PredictUsd price that part at the upstream's cached-input price: what `overflow=cheapest`
// compares with self-hosted.
//
// Threads: ExternalUpstreams is safe to call from any thread (one mutex guards the health and
// the prompt records); configurations are immutable once constructed.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/block_key.h"
#include "common/status.h"
#include "router/routed_prefixes.h"

namespace pdserve::router {

// Where a tenant's requests may go (the keys file's `overflow=`).
enum class OverflowRule {
  kNever,     // self-hosted workers only: it waits, or is refused
  kOverflow,  // an upstream when admission predicts a TTFT objective miss
  kCheapest,  // as kOverflow, and an upstream also when it is cheaper than self-hosted lately
};
Result<OverflowRule> ParseOverflowRule(std::string_view text);
const char* OverflowRuleName(OverflowRule rule);

// http[s]://host[:port][/prefix]: requests go to prefix + "/v1/completions" and the like.
struct UpstreamUrl {
  bool tls = false;
  std::string host;
  std::string port;         // "443" or "80" when the URL names none
  std::string path_prefix;  // without a trailing '/'; "" for none
};
Result<UpstreamUrl> ParseUpstreamUrl(std::string_view url);

struct UpstreamConfig {
  std::string name;  // as the flags and the metrics name it
  std::string url;
  UpstreamUrl parsed;
  std::string model;    // the model the upstream is asked for; "" : the client's model id
  std::string api_key;  // sent as "Authorization: Bearer ..."; "" : none
  double input_cost_per_token = 0, output_cost_per_token = 0;  // USD, from the price sheet
  // USD per prompt token the upstream read from its prompt cache (the sheet's
  // cache_read_input_token_cost); unset: such tokens cost input_cost_per_token.
  std::optional<double> cached_input_cost_per_token;
};

// The gateway's flags, each NAME=VALUE: --external NAME=URL (one per upstream), --external-model
// NAME=MODEL and --external-key-env NAME=VAR (the key read from that environment variable, which
// must be set). Errors name the flag and the entry. `getenv` reads the environment.
Result<std::vector<UpstreamConfig>> UpstreamsFromFlags(
    const std::vector<std::string>& externals, const std::vector<std::string>& models,
    const std::vector<std::string>& key_envs,
    const std::function<const char*(const char*)>& getenv);

struct UpstreamHealthOptions {
  std::chrono::seconds window{60};    // failures are counted over this much recent time
  std::chrono::seconds cooldown{30};  // how long a failing upstream is left alone
  int min_requests = 3;               // fewer requests in the window never cool it down
  // How long an upstream's prompt cache is believed to hold a prompt's blocks after one holding
  // them was last sent there (default 300 s: the hosted APIs keep an unused prefix some 5 to 10
  // minutes). 0: no cached part is predicted.
  std::chrono::seconds prompt_cache_ttl{300};
};

class ExternalUpstreams {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  ExternalUpstreams(std::vector<UpstreamConfig> configs, UpstreamHealthOptions options = {},
                    Clock clock = &std::chrono::steady_clock::now);

  const std::vector<UpstreamConfig>& configs() const { return configs_; }
  bool empty() const { return configs_.empty(); }

  // The upstream a request of `prompt` (its token ids) and up to `max_tokens` should use now:
  // the cheapest for those tokens (PredictUsd) among those not cooling down and not in
  // `exclude` (the first configured on a tie); -1 when there is none. `usd`, when given, gets
  // the picked one's PredictUsd (the prompt is hashed once).
  int Pick(std::span<const int32_t> prompt, int64_t max_tokens, const std::set<int>& exclude = {},
           double* usd = nullptr) const;
  // USD upstream `index` is predicted to charge for `prompt` and `max_tokens` completion tokens:
  // the part of the prompt it is believed to hold (PredictedCachedTokens) at its cached-input
  // price, the rest at its input price.
  double PredictUsd(int index, std::span<const int32_t> prompt, int64_t max_tokens) const;
  // The leading tokens of `prompt`, in whole 16-token blocks, sent to upstream `index` within
  // the prompt cache's ttl.
  int64_t PredictedCachedTokens(int index, std::span<const int32_t> prompt) const;
  // `prompt` was sent to upstream `index` now.
  void Sent(int index, std::span<const int32_t> prompt);
  // Whether upstream `index` takes requests now (not cooling down).
  bool Available(int index) const;
  // An attempt's end on upstream `index`: ok, or failed (an error answer, a broken connection).
  void Record(int index, bool ok);
  // Why no upstream outside `exclude` can take a request now, for a 503's message: each one
  // cooling down (and for how long) or already tried.
  std::string WhyNone(const std::set<int>& exclude = {}) const;

 private:
  struct Health {
    std::deque<std::pair<std::chrono::steady_clock::time_point, bool>> results;  // (at, ok)
    std::chrono::steady_clock::time_point cool_until;
  };
  // Leaves cooldown (forgetting the window) once it is over; trims the window.
  void RefreshLocked(Health& h, std::chrono::steady_clock::time_point now) const;

  int64_t PredictedCachedTokensLocked(int index, std::span<const BlockKey> keys) const;
  double PredictUsdLocked(int index, int64_t prompt_tokens, std::span<const BlockKey> keys,
                          int64_t max_tokens) const;

  const std::vector<UpstreamConfig> configs_;
  const UpstreamHealthOptions options_;
  const Clock clock_;
  mutable std::mutex mu_;
  mutable std::vector<Health> health_;  // by index; guarded by mu_
  RoutedPrefixes sent_prompts_;         // by index as the worker id; guarded by mu_
};

}  // namespace pdserve::router
