#include "bench/serve/mooncake_trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/serve/prefix_cache_metrics.h"

namespace pdserve::bench {
namespace {

using nlohmann::json;

// Seeds of the words: one per hash id; the tails unique to a request from another stream.
constexpr uint64_t kBlockSalt = 0x6d6f6f6e63616b65;  // "mooncake"
constexpr uint64_t kTailSalt = 0x7461696c776f7264;   // "tailword"

struct TraceLine {
  int64_t line = 0;
  double timestamp_ms = 0;
  int64_t input_length = 0;
  int64_t output_length = 0;
  std::vector<uint64_t> hash_ids;
};

Result<TraceLine> ParseLine(const std::string& path, int64_t line_number, const std::string& text,
                            bool output_fixed) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument(fmt::format("{}:{}: {}", path, line_number, why));
  };
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return bad("not a JSON object");
  TraceLine t;
  t.line = line_number;
  auto timestamp = doc.find("timestamp");
  if (timestamp == doc.end() || !timestamp->is_number() || !(timestamp->get<double>() >= 0)) {
    return bad("\"timestamp\" must be a number of milliseconds >= 0");
  }
  t.timestamp_ms = timestamp->get<double>();
  auto count = [&](const char* key, int64_t& out) -> Status {
    auto it = doc.find(key);
    if (it == doc.end() || !it->is_number_integer() || it->get<int64_t>() < 1) {
      return bad(fmt::format("\"{}\" must be an integer >= 1", key));
    }
    out = it->get<int64_t>();
    return Status::Ok();
  };
  PDSERVE_RETURN_IF_ERROR(count("input_length", t.input_length));
  if (!output_fixed) PDSERVE_RETURN_IF_ERROR(count("output_length", t.output_length));
  auto ids = doc.find("hash_ids");
  if (ids == doc.end() || !ids->is_array()) return bad("\"hash_ids\" must be an array");
  for (const json& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) {
      return bad("\"hash_ids\" must hold integers >= 0");
    }
    t.hash_ids.push_back(id.get<uint64_t>());
  }
  return t;
}

std::string PromptText(const TraceLine& t) {
  std::string text;
  int64_t left = t.input_length;
  auto append = [&](std::string block) {
    if (!text.empty() && !block.empty()) text.push_back(' ');
    text += block;
  };
  for (uint64_t id : t.hash_ids) {
    if (left <= 0) break;
    int64_t words = std::min(left, kMooncakeBlockTokens);
    append(MooncakeBlockText(id, words));
    left -= words;
  }
  if (left > 0) {
    std::mt19937_64 rng(kTailSalt ^ static_cast<uint64_t>(t.line));
    append(RandomWordText(left, rng, nullptr).text);
  }
  return text;
}

}  // namespace

std::string MooncakeBlockText(uint64_t hash_id, int64_t words) {
  std::mt19937_64 rng(kBlockSalt ^ (hash_id * 0x9e3779b97f4a7c15ULL));
  return RandomWordText(words, rng, nullptr).text;
}

Result<std::vector<TraceRequest>> LoadMooncakeTrace(const std::string& path,
                                                    const MooncakeTraceOptions& options,
                                                    const TokenCounter& counter) {
  if (!(options.time_scale > 0) || std::isinf(options.time_scale)) {
    return InvalidArgument(fmt::format("--trace-time-scale {} must be > 0", options.time_scale));
  }
  if (options.fixed_output_len && *options.fixed_output_len < 1) {
    return InvalidArgument("--output-len must be >= 1");
  }
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot open dataset file '{}'", path));
  std::vector<TraceLine> lines;
  std::string text;
  int64_t line_number = 0;
  while (static_cast<int64_t>(lines.size()) < options.max_requests && std::getline(in, text)) {
    ++line_number;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    PDSERVE_ASSIGN_OR_RETURN(
        TraceLine line, ParseLine(path, line_number, text, options.fixed_output_len.has_value()));
    lines.push_back(std::move(line));
  }
  if (lines.empty()) return InvalidArgument(fmt::format("'{}' holds no requests", path));
  std::stable_sort(lines.begin(), lines.end(), [](const TraceLine& a, const TraceLine& b) {
    return a.timestamp_ms < b.timestamp_ms;
  });
  const double earliest_ms = lines.front().timestamp_ms;
  // Per hash id, the most of its block's words sent so far (a last block may be partial).
  std::unordered_map<uint64_t, int64_t> sent;
  std::vector<TraceRequest> requests;
  requests.reserve(lines.size());
  for (const TraceLine& t : lines) {
    TraceRequest r;
    r.prompt.prompt = PromptText(t);
    r.prompt.prompt_tokens = counter ? counter(r.prompt.prompt) : t.input_length;
    r.prompt.output_len = options.fixed_output_len.value_or(t.output_length);
    r.send_offset_s = (t.timestamp_ms - earliest_ms) / 1000.0 * options.time_scale;
    // Equal ids stand for equal prefixes: the leading blocks sent before are cached ideally, up
    // to the first one sent shorter than this request uses it.
    int64_t shared = 0;
    bool leading = true;
    for (size_t j = 0; j < t.hash_ids.size(); ++j) {
      int64_t used = std::min(kMooncakeBlockTokens,
                              t.input_length - static_cast<int64_t>(j) * kMooncakeBlockTokens);
      if (used <= 0) break;
      int64_t& before = sent[t.hash_ids[j]];
      if (leading) shared += std::min(used, before);
      leading = leading && before >= used;
      before = std::max(before, used);
    }
    r.ideal_cached_tokens = IdealSharedPrefixCachedTokens(shared, r.prompt.prompt_tokens);
    requests.push_back(std::move(r));
  }
  return requests;
}

}  // namespace pdserve::bench
