#include "gateway/sampling_defaults.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace pdserve::gateway {

namespace {

using json = nlohmann::json;

// Reads `key` of `j` into `*out` when present: a number in [lo, hi].
Status ReadNumber(const json& j, const char* key, double lo, double hi, const std::string& origin,
                  double* out, bool* found) {
  *found = false;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number()) return InvalidArgument(origin + ": '" + key + "' must be a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    std::ostringstream range;
    range << origin << ": '" << key << "' is " << v << ", outside [" << lo << ", " << hi << "]";
    return InvalidArgument(range.str());
  }
  *out = v;
  *found = true;
  return Status::Ok();
}

}  // namespace

Result<SamplingDefaults> ParseSamplingDefaults(const std::string& json_text,
                                               const std::string& origin) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(origin + ": not valid JSON");
  if (!j.is_object()) return InvalidArgument(origin + ": not a JSON object");
  SamplingDefaults d;
  double v = 0;
  bool found = false;
  PDSERVE_RETURN_IF_ERROR(ReadNumber(j, "temperature", 0, 2, origin, &v, &found));
  if (found) d.temperature = static_cast<float>(v);
  PDSERVE_RETURN_IF_ERROR(ReadNumber(j, "top_p", 0, 1, origin, &v, &found));
  if (found) {
    if (v == 0) return InvalidArgument(origin + ": 'top_p' must be greater than 0");
    d.top_p = static_cast<float>(v);
  }
  PDSERVE_RETURN_IF_ERROR(ReadNumber(j, "top_k", -1, 1 << 20, origin, &v, &found));
  if (found) {
    if (v != static_cast<int>(v)) return InvalidArgument(origin + ": 'top_k' must be an integer");
    d.top_k = v < 0 ? 0 : static_cast<int>(v);  // -1, as vLLM writes it: all tokens
  }
  PDSERVE_RETURN_IF_ERROR(ReadNumber(j, "max_new_tokens", 1, 1 << 20, origin, &v, &found));
  if (found) {
    if (v != static_cast<int>(v)) {
      return InvalidArgument(origin + ": 'max_new_tokens' must be an integer");
    }
    d.max_tokens = static_cast<int>(v);
  }
  return d;
}

Result<SamplingDefaults> LoadSamplingDefaults(const std::string& model_dir) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "generation_config.json";
  if (!std::filesystem::is_directory(model_dir) || !std::filesystem::exists(path)) {
    return SamplingDefaults{};
  }
  std::ifstream in(path);
  if (!in) return Unavailable(path.string() + ": cannot read");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseSamplingDefaults(text.str(), path.string());
}

}  // namespace pdserve::gateway
