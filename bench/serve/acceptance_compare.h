// Comparing two acceptance JSONs (`--compare-with FILE`): the run that signed the contract and
// one after it. Each headline figure of either run (environment facts, KV GB/s and ratio per
// message size, serving peaks, each run's latency percentiles by request rate, cost, MFU,
// scaling, the verdict and each threshold's measured value) becomes one row: before, after and
// the change (relative for numbers). Pure functions: thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace pdserve::bench {

// The figures compared, in report order: name -> value (a number or a string).
std::vector<std::pair<std::string, nlohmann::json>> HeadlineFigures(const nlohmann::json& doc);

// {"with": path, "before_date", "after_date", "changed": N, "rows": [{"figure", "before",
// "after", "change"}]}; a figure missing from one side shows as null there.
nlohmann::json CompareAcceptance(const nlohmann::json& before, const nlohmann::json& after,
                                 const std::string& before_path);

// Reads an acceptance JSON (kind "pdserve_acceptance").
Result<nlohmann::json> ReadAcceptanceJson(const std::string& path);

}  // namespace pdserve::bench
