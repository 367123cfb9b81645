// A self-contained HTML page for a serving session (and the acceptance report): inline SVG line
// charts of latency percentiles against request rate, the TTFT distribution of each run, and a
// table of runs. No scripts, no fonts, nothing fetched from the network: the file can be mailed
// or archived as is. Pure functions: thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bench/serve/serve_session.h"

namespace pdserve::bench {

struct HtmlSection {
  std::string title;
  std::vector<std::pair<std::string, std::string>> rows;  // key, value (escaped on output)
  std::string html;  // a fragment its maker escaped (tables, SVG), printed after the rows
};

// `sections` are printed before the charts (environment, scaling, ...).
std::string HtmlReport(const std::string& title, const ServeSession& session,
                       const std::vector<HtmlSection>& sections);

}  // namespace pdserve::bench
