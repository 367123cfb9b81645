// The cost report as CSV: the JSON's figures flattened, one per line; see cost_report.h.
#include "common/json_text.h"
#include "ledger/cost_report.h"

namespace pdserve::ledger {
namespace {

using Json = nlohmann::json;

void FlattenCsv(const Json& j, const std::string& path, std::string* out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      FlattenCsv(value, path.empty() ? key : path + "." + key, out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i)
      FlattenCsv(j[i], path + "[" + std::to_string(i) + "]", out);
  } else {
    const std::string value = j.is_string() ? j.get<std::string>() : j.is_null() ? "" : DumpJson(j);
    *out += CsvField(path) + "," + CsvField(value) + "\n";
  }
}

}  // namespace

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string CostReportCsv(const CostReport& report) {
  std::string out = "metric,value\n";
  FlattenCsv(CostReportJson(report), "", &out);
  return out;
}

}  // namespace pdserve::ledger
