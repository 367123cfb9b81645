// The KV bandwidth part of the acceptance report, drawn from the JSON `pdserve bench kv` wrote
// (kept under "kv_bandwidth" in the acceptance JSON): the transport, the peer and hosts, a table
// per message size (KV GB/s with its quartiles over iterations, the baseline, their ratio with
// its quartiles) and a plot of bandwidth against message size on a log scale, like nccl-tests'
// bus-bandwidth curves. A test that did not run says so and why. Pure functions: thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace pdserve::bench {

// GB/s quartiles of one result row from its per-iteration times ("iterations"/"kv_us"); the
// row's median "gbps" when it has no iterations. {p25, median, p75}.
struct GbpsQuartiles {
  double p25 = 0, median = 0, p75 = 0;
};
GbpsQuartiles KvRowQuartiles(const nlohmann::json& row);

// An HTML fragment (escaped; tables and an inline SVG).
std::string KvSectionHtml(const nlohmann::json& kv_bandwidth);
// The same figures as plain text lines.
std::string KvSectionText(const nlohmann::json& kv_bandwidth);

}  // namespace pdserve::bench
