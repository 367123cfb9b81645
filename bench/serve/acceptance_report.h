// The acceptance report drawn from its JSON (acceptance.h), so the HTML and the text show only
// what the JSON keeps: the verdict first (PASS, FAIL or no thresholds given, each threshold with
// its measured value), then the comparison with an earlier run when there is one, the
// environment and every host, the KV bandwidth test (acceptance_kv.h), MFU and scaling. The HTML
// sections go before the serving charts of HtmlReport. Pure functions: thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/serve/html_report.h"

namespace pdserve::bench {

std::vector<HtmlSection> AcceptanceSections(const nlohmann::json& doc);

// The text summary: the verdict line first, then the same parts as the HTML but the charts.
std::string AcceptanceText(const nlohmann::json& doc);

}  // namespace pdserve::bench
