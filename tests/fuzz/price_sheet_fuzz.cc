// Fuzz target: price sheets in LiteLLM's format (ledger/price_sheet.h), as `pdserve report`
// reads a file a user passes. A sheet either loads, with every price a non-negative number and
// sorted by name, or is refused with an error naming the file.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ledger/price_sheet.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto sheet = pdserve::ledger::PriceSheet::Parse(text, "fuzz.json");
  if (!sheet.ok()) {
    if (sheet.status().message().find("fuzz.json") == std::string::npos) abort();
    return 0;
  }
  const auto& prices = sheet->prices();
  for (size_t i = 0; i < prices.size(); ++i) {
    const auto& p = prices[i];
    if (!(p.input_cost_per_token >= 0) || !(p.output_cost_per_token >= 0)) abort();
    if (!std::isfinite(p.input_cost_per_token) || !std::isfinite(p.output_cost_per_token)) abort();
    if (i > 0 && !(prices[i - 1].name < p.name)) abort();
  }
  // Selecting every entry by name finds each one.
  std::vector<std::string> names;
  for (const auto& p : prices) names.push_back(p.name);
  if (!names.empty() && !sheet->Select(names).ok()) abort();
  return 0;
}
