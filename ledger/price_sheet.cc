// Reads LiteLLM-format price sheets; see price_sheet.h.
#include "ledger/price_sheet.h"
#include "common/json_text.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

namespace pdserve::ledger {
namespace {

// The cost under `key`: nullopt when absent or null (the entry is skipped), an error when it
// is not a non-negative number.
Result<std::optional<double>> ReadCost(const nlohmann::json& entry, const char* key,
                                       const std::string& where) {
  auto it = entry.find(key);
  if (it == entry.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number() || it->get<double>() < 0 || !std::isfinite(it->get<double>())) {
    return InvalidArgument(where + ": " + key + " must be a non-negative number, got " +
                           DescribeJson(*it));
  }
  return std::optional<double>(it->get<double>());
}

}  // namespace

Result<PriceSheet> PriceSheet::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("price sheet " + path + ": cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return NotFound("price sheet " + path + ": cannot read the file");
  return Parse(text.str(), path);
}

Result<PriceSheet> PriceSheet::Parse(const std::string& text, const std::string& source) {
  nlohmann::json sheet;
  try {
    sheet = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range: 1e999
    return InvalidArgument("price sheet " + source + ": not JSON: " + e.what());
  }
  if (!sheet.is_object()) {
    return InvalidArgument("price sheet " + source +
                           ": expected a JSON object of model name -> prices (LiteLLM format)");
  }
  PriceSheet result;
  result.source_ = source;
  for (const auto& [name, entry] : sheet.items()) {
    if (name == "sample_spec" || !entry.is_object()) continue;  // LiteLLM's documentation entry
    const std::string where = "price sheet " + source + ", entry \"" + name + "\"";
    PDSERVE_ASSIGN_OR_RETURN(auto input, ReadCost(entry, "input_cost_per_token", where));
    PDSERVE_ASSIGN_OR_RETURN(auto output, ReadCost(entry, "output_cost_per_token", where));
    PDSERVE_ASSIGN_OR_RETURN(auto cached, ReadCost(entry, "cache_read_input_token_cost", where));
    if (!input || !output) continue;
    ApiPrice price{name, "", *input, *output, cached};
    if (auto p = entry.find("litellm_provider"); p != entry.end() && p->is_string()) {
      price.provider = p->get<std::string>();
    }
    result.prices_.push_back(std::move(price));
  }
  std::sort(result.prices_.begin(), result.prices_.end(),
            [](const ApiPrice& a, const ApiPrice& b) { return a.name < b.name; });
  return result;
}

Result<std::vector<ApiPrice>> PriceSheet::Select(const std::vector<std::string>& names) const {
  if (names.empty()) return prices_;
  std::vector<ApiPrice> selected;
  for (const std::string& name : names) {
    auto it = std::find_if(prices_.begin(), prices_.end(),
                           [&](const ApiPrice& p) { return p.name == name; });
    if (it == prices_.end()) {
      return NotFound("price sheet " + source_ + " has no priced entry \"" + name +
                      "\" (entries need input_cost_per_token and output_cost_per_token)");
    }
    selected.push_back(*it);
  }
  return selected;
}

}  // namespace pdserve::ledger
