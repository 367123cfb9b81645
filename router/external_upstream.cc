#include "router/external_upstream.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace pdserve::router {

Result<OverflowRule> ParseOverflowRule(std::string_view text) {
  if (text == "never") return OverflowRule::kNever;
  if (text == "overflow") return OverflowRule::kOverflow;
  if (text == "cheapest") return OverflowRule::kCheapest;
  return InvalidArgument("an overflow rule is never, overflow or cheapest, not '" +
                         std::string(text) + "'");
}

const char* OverflowRuleName(OverflowRule rule) {
  switch (rule) {
    case OverflowRule::kNever:
      return "never";
    case OverflowRule::kOverflow:
      return "overflow";
    case OverflowRule::kCheapest:
      return "cheapest";
  }
  return "never";
}

Result<UpstreamUrl> ParseUpstreamUrl(std::string_view url) {
  UpstreamUrl u;
  std::string_view rest;
  if (url.rfind("https://", 0) == 0) {
    u.tls = true;
    rest = url.substr(8);
  } else if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else {
    return InvalidArgument("an upstream URL starts with https:// (or http://), not '" +
                           std::string(url) + "'");
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view prefix = rest.substr(slash);
    while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
    u.path_prefix = std::string(prefix);
  }
  if (authority.find('@') != std::string_view::npos ||
      authority.find('?') != std::string_view::npos) {
    return InvalidArgument("an upstream URL has no user or query part: '" + std::string(url) + "'");
  }
  u.port = u.tls ? "443" : "80";
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgument("bad IPv6 address in '" + std::string(url) + "'");
    }
    u.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority.front() != ':') {
      return InvalidArgument("bad upstream URL '" + std::string(url) + "'");
    }
    if (!authority.empty()) u.port = std::string(authority.substr(1));
  } else {
    const size_t colon = authority.find(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) u.port = std::string(authority.substr(colon + 1));
  }
  int port = 0;
  auto [ptr, ec] = std::from_chars(u.port.data(), u.port.data() + u.port.size(), port);
  if (u.host.empty() || ec != std::errc() || ptr != u.port.data() + u.port.size() || port <= 0 ||
      port > 65535) {
    return InvalidArgument("an upstream URL is http[s]://host[:port][/prefix], not '" +
                           std::string(url) + "'");
  }
  return u;
}

namespace {

// NAME=VALUE, both non-empty.
Status SplitEntry(const std::string& flag, const std::string& entry, std::string* name,
                  std::string* value) {
  const size_t eq = entry.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) {
    return InvalidArgument(flag + " takes NAME=VALUE, not '" + entry + "'");
  }
  *name = entry.substr(0, eq);
  *value = entry.substr(eq + 1);
  return Status::Ok();
}

}  // namespace

Result<std::vector<UpstreamConfig>> UpstreamsFromFlags(
    const std::vector<std::string>& externals, const std::vector<std::string>& models,
    const std::vector<std::string>& key_envs,
    const std::function<const char*(const char*)>& getenv) {
  std::vector<UpstreamConfig> configs;
  std::map<std::string, size_t> index;
  for (const std::string& entry : externals) {
    UpstreamConfig c;
    PDSERVE_RETURN_IF_ERROR(SplitEntry("--external", entry, &c.name, &c.url));
    auto parsed = ParseUpstreamUrl(c.url);
    if (!parsed.ok())
      return InvalidArgument("--external " + c.name + ": " + parsed.status().message());
    c.parsed = *parsed;
    if (!index.emplace(c.name, configs.size()).second) {
      return InvalidArgument("--external: upstream '" + c.name + "' is given twice");
    }
    configs.push_back(std::move(c));
  }
  auto find = [&](const std::string& flag, const std::string& name) -> Result<UpstreamConfig*> {
    auto it = index.find(name);
    if (it == index.end()) {
      return InvalidArgument(flag + " names upstream '" + name + "', which no --external gives");
    }
    return &configs[it->second];
  };
  for (const std::string& entry : models) {
    std::string name, model;
    PDSERVE_RETURN_IF_ERROR(SplitEntry("--external-model", entry, &name, &model));
    PDSERVE_ASSIGN_OR_RETURN(UpstreamConfig * c, find("--external-model", name));
    c->model = model;
  }
  for (const std::string& entry : key_envs) {
    std::string name, variable;
    PDSERVE_RETURN_IF_ERROR(SplitEntry("--external-key-env", entry, &name, &variable));
    PDSERVE_ASSIGN_OR_RETURN(UpstreamConfig * c, find("--external-key-env", name));
    const char* key = getenv(variable.c_str());
    if (key == nullptr || *key == '\0') {
      return InvalidArgument("--external-key-env " + name + ": the environment variable " +
                             variable + " is not set");
    }
    c->api_key = key;
  }
  return configs;
}

namespace {

// Tokens in a block of the upstreams' prompt records.
constexpr int kUpstreamBlockTokens = 16;
// At most this many blocks recorded per upstream (some 4M tokens, about 20 MB).
constexpr size_t kMaxRecordedBlocks = size_t{1} << 18;

RoutedPrefixOptions PromptCacheOptions(const UpstreamHealthOptions& options) {
  RoutedPrefixOptions o;
  // A ttl of 0 records nothing (see Sent); RoutedPrefixes takes a ttl > 0.
  o.ttl = std::max<std::chrono::milliseconds>(options.prompt_cache_ttl, std::chrono::seconds(1));
  return o;
}

}  // namespace

ExternalUpstreams::ExternalUpstreams(std::vector<UpstreamConfig> configs,
                                     UpstreamHealthOptions options, Clock clock)
    : configs_(std::move(configs)),
      options_(options),
      clock_(clock),
      health_(configs_.size()),
      sent_prompts_(PromptCacheOptions(options), clock) {
  for (size_t i = 0; i < configs_.size(); ++i) sent_prompts_.AddWorker(i, kMaxRecordedBlocks);
}

int64_t ExternalUpstreams::PredictedCachedTokensLocked(int index,
                                                       std::span<const BlockKey> keys) const {
  if (keys.empty() || options_.prompt_cache_ttl.count() <= 0) return 0;
  const uint64_t worker = static_cast<uint64_t>(index);
  return int64_t{sent_prompts_.MatchedBlocks(keys, std::span(&worker, 1))[0]} *
         kUpstreamBlockTokens;
}

double ExternalUpstreams::PredictUsdLocked(int index, int64_t prompt_tokens,
                                           std::span<const BlockKey> keys,
                                           int64_t max_tokens) const {
  const UpstreamConfig& c = configs_[index];
  const int64_t cached = std::min(prompt_tokens, PredictedCachedTokensLocked(index, keys));
  return static_cast<double>(prompt_tokens - cached) * c.input_cost_per_token +
         static_cast<double>(cached) *
             c.cached_input_cost_per_token.value_or(c.input_cost_per_token) +
         static_cast<double>(max_tokens) * c.output_cost_per_token;
}

double ExternalUpstreams::PredictUsd(int index, std::span<const int32_t> prompt,
                                     int64_t max_tokens) const {
  if (index < 0 || index >= static_cast<int>(configs_.size())) return 0;
  const std::vector<BlockKey> keys = PromptBlockKeys(0, prompt, kUpstreamBlockTokens);
  std::lock_guard lock(mu_);
  return PredictUsdLocked(index, static_cast<int64_t>(prompt.size()), keys, max_tokens);
}

int64_t ExternalUpstreams::PredictedCachedTokens(int index, std::span<const int32_t> prompt) const {
  if (index < 0 || index >= static_cast<int>(configs_.size())) return 0;
  const std::vector<BlockKey> keys = PromptBlockKeys(0, prompt, kUpstreamBlockTokens);
  std::lock_guard lock(mu_);
  return PredictedCachedTokensLocked(index, keys);
}

void ExternalUpstreams::Sent(int index, std::span<const int32_t> prompt) {
  if (index < 0 || index >= static_cast<int>(configs_.size()) ||
      options_.prompt_cache_ttl.count() <= 0) {
    return;
  }
  const std::vector<BlockKey> keys = PromptBlockKeys(0, prompt, kUpstreamBlockTokens);
  std::lock_guard lock(mu_);
  sent_prompts_.Routed(static_cast<uint64_t>(index), keys);
}

void ExternalUpstreams::RefreshLocked(Health& h, std::chrono::steady_clock::time_point now) const {
  if (h.cool_until != std::chrono::steady_clock::time_point{} && now >= h.cool_until) {
    h.cool_until = {};
    h.results.clear();  // back from cooldown: judged afresh
  }
  while (!h.results.empty() && h.results.front().first <= now - options_.window) {
    h.results.pop_front();
  }
}

bool ExternalUpstreams::Available(int index) const {
  if (index < 0 || index >= static_cast<int>(configs_.size())) return false;
  std::lock_guard lock(mu_);
  Health& h = health_[index];
  RefreshLocked(h, clock_());
  return h.cool_until == std::chrono::steady_clock::time_point{};
}

int ExternalUpstreams::Pick(std::span<const int32_t> prompt, int64_t max_tokens,
                            const std::set<int>& exclude, double* usd) const {
  const std::vector<BlockKey> keys = PromptBlockKeys(0, prompt, kUpstreamBlockTokens);
  const auto prompt_tokens = static_cast<int64_t>(prompt.size());
  const auto now = clock_();
  std::lock_guard lock(mu_);
  int best = -1;
  double best_cost = std::numeric_limits<double>::infinity();
  for (int i = 0; i < static_cast<int>(configs_.size()); ++i) {
    if (exclude.count(i)) continue;
    Health& h = health_[i];
    RefreshLocked(h, now);
    if (h.cool_until != std::chrono::steady_clock::time_point{}) continue;
    const double cost = PredictUsdLocked(i, prompt_tokens, keys, max_tokens);
    if (best < 0 || cost < best_cost) {
      best = i;
      best_cost = cost;
    }
  }
  if (usd && best >= 0) *usd = best_cost;
  return best;
}

void ExternalUpstreams::Record(int index, bool ok) {
  if (index < 0 || index >= static_cast<int>(configs_.size())) return;
  const auto now = clock_();
  std::lock_guard lock(mu_);
  Health& h = health_[index];
  RefreshLocked(h, now);
  if (h.cool_until != std::chrono::steady_clock::time_point{}) return;  // a straggler's end
  h.results.emplace_back(now, ok);
  const auto failed =
      std::count_if(h.results.begin(), h.results.end(), [](const auto& r) { return !r.second; });
  const auto n = static_cast<int64_t>(h.results.size());
  if (n >= options_.min_requests && 2 * failed > n) h.cool_until = now + options_.cooldown;
}

std::string ExternalUpstreams::WhyNone(const std::set<int>& exclude) const {
  if (configs_.empty()) return "no external upstream is configured";
  const auto now = clock_();
  std::lock_guard lock(mu_);
  std::string why;
  for (int i = 0; i < static_cast<int>(configs_.size()); ++i) {
    if (!why.empty()) why += "; ";
    Health& h = health_[i];
    RefreshLocked(h, now);
    why += "upstream '" + configs_[i].name + "' ";
    if (h.cool_until != std::chrono::steady_clock::time_point{}) {
      const double left = std::chrono::duration<double>(h.cool_until - now).count();
      why += "is cooling down after failing more than half its requests (" +
             std::to_string(static_cast<int>(std::ceil(left))) + " s left)";
    } else if (exclude.count(i)) {
      why += "failed this request";
    } else {
      why += "is available";
    }
  }
  return why;
}

}  // namespace pdserve::router
