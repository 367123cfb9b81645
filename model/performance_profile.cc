#include "model/performance_profile.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/json_text.h"
#include "common/percentile.h"

namespace pdserve::model {
namespace {

using nlohmann::json;

// Solves the k x k system a * c = b in place (Gaussian elimination with partial pivoting).
// False when it is singular.
bool Solve(std::array<std::array<double, 3>, 3>& a, std::array<double, 3>& b, int k,
           std::array<double, 3>* c) {
  for (int col = 0; col < k; ++col) {
    int pivot = col;
    for (int r = col + 1; r < k; ++r) {
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    }
    if (std::fabs(a[pivot][col]) < 1e-300) return false;
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    for (int r = col + 1; r < k; ++r) {
      const double f = a[r][col] / a[col][col];
      for (int j = col; j < k; ++j) a[r][j] -= f * a[col][j];
      b[r] -= f * b[col];
    }
  }
  for (int r = k - 1; r >= 0; --r) {
    double s = b[r];
    for (int j = r + 1; j < k; ++j) s -= a[r][j] * (*c)[j];
    (*c)[r] = s / a[r][r];
  }
  return true;
}

Status ReadNumber(const json& j, const char* key, const std::string& source, double* out,
                  bool required = true) {
  auto it = j.find(key);
  if (it == j.end()) {
    return required ? InvalidArgument(source + ": missing field '" + key + "'") : Status::Ok();
  }
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
    return InvalidArgument(source + ": field '" + key + "' must be a number >= 0, got " +
                           DescribeJson(*it));
  }
  *out = it->get<double>();
  return Status::Ok();
}

Status ReadInt(const json& j, const char* key, const std::string& source, int* out, int min,
               bool required = true) {
  auto it = j.find(key);
  if (it == j.end()) {
    return required ? InvalidArgument(source + ": missing field '" + key + "'") : Status::Ok();
  }
  if (!it->is_number_integer() || it->get<int64_t>() < min || it->get<int64_t>() > (1 << 30)) {
    return InvalidArgument(fmt::format("{}: field '{}' must be an integer from {} to 2^30, got {}",
                                       source, key, min, DescribeJson(*it)));
  }
  *out = it->get<int>();
  return Status::Ok();
}

Status ReadString(const json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  if (!it->is_string()) return InvalidArgument(std::string("field '") + key + "' must be a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

Result<LinearStepModel> ReadModel(const json& j, const char* key, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_object()) {
    return InvalidArgument(source + ": '" + key + "' must be an object {base, per_token, " +
                           "per_context}");
  }
  const std::string where = source + ": " + key;
  LinearStepModel m;
  PDSERVE_RETURN_IF_ERROR(ReadNumber(*it, "base", where, &m.base));
  PDSERVE_RETURN_IF_ERROR(ReadNumber(*it, "per_token", where, &m.per_token));
  PDSERVE_RETURN_IF_ERROR(ReadNumber(*it, "per_context", where, &m.per_context));
  return m;
}

// An optional array of ascending factors above 0; absent: empty.
Result<std::vector<double>> ReadSpread(const json& j, const char* key, const std::string& source) {
  std::vector<double> spread;
  auto it = j.find(key);
  if (it == j.end()) return spread;
  const std::string where = source + ": " + key;
  if (!it->is_array() || it->size() > 1000) {
    return InvalidArgument(where + " must be an array of at most 1000 ascending factors above 0");
  }
  for (const json& f : *it) {
    if (!f.is_number() || !std::isfinite(f.get<double>()) || f.get<double>() <= 0 ||
        f.get<double>() > 1e6) {
      return InvalidArgument(where + ": a factor must be a number above 0, got " + DescribeJson(f));
    }
    if (!spread.empty() && f.get<double>() < spread.back()) {
      return InvalidArgument(fmt::format("{}: factors must ascend; {} follows {}", where,
                                         f.get<double>(), spread.back()));
    }
    spread.push_back(f.get<double>());
  }
  return spread;
}

// An optional curve {points: [[x, seconds], ...], per_context}; absent: empty.
Result<MeasuredCurve> ReadCurve(const json& j, const char* key, const std::string& source) {
  MeasuredCurve c;
  auto it = j.find(key);
  if (it == j.end()) return c;
  const std::string where = source + ": " + key;
  if (!it->is_object()) return InvalidArgument(where + " must be an object {points, per_context}");
  PDSERVE_RETURN_IF_ERROR(ReadNumber(*it, "per_context", where, &c.per_context));
  auto points = it->find("points");
  if (points == it->end() || !points->is_array() || points->empty()) {
    return InvalidArgument(where + ": 'points' must be a non-empty array of [count, seconds]");
  }
  for (const json& p : *points) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || p[0].get<int64_t>() < 1 ||
        p[0].get<int64_t>() > (1 << 30) || !p[1].is_number() ||
        !std::isfinite(p[1].get<double>()) || p[1].get<double>() < 0) {
      return InvalidArgument(where + ": a point must be [count >= 1, seconds >= 0], got " +
                             DescribeJson(p));
    }
    const int x = p[0].get<int>();
    if (!c.points.empty() && x <= c.points.back().first) {
      return InvalidArgument(fmt::format("{}: points must ascend in count; {} follows {}", where, x,
                                         c.points.back().first));
    }
    c.points.emplace_back(x, p[1].get<double>());
  }
  return c;
}

json CurveJson(const MeasuredCurve& c) {
  json points = json::array();
  for (const auto& [x, seconds] : c.points) points.push_back({x, seconds});
  return {{"points", points}, {"per_context", c.per_context}};
}

json ModelJson(const LinearStepModel& m) {
  return {{"base", m.base}, {"per_token", m.per_token}, {"per_context", m.per_context}};
}

// Directories FindProfile searches, in order.
std::vector<std::filesystem::path> ProfileDirectories() {
  std::vector<std::filesystem::path> dirs;
  if (const char* env = std::getenv("PDSERVE_PROFILES"); env && *env) dirs.emplace_back(env);
  dirs.emplace_back("profiles");
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // build/pdserve in a checkout: its profiles/ is one level up.
    dirs.push_back(exe.parent_path() / "profiles");
    dirs.push_back(exe.parent_path().parent_path() / "profiles");
  }
  return dirs;
}

}  // namespace

void AddPromptChunk(StepShape& shape, int start, int tokens) {
  shape.prompt_tokens += tokens;
  shape.prompt_attention += int64_t{tokens} * start + int64_t{tokens} * (int64_t{tokens} + 1) / 2;
  shape.max_context = std::max(shape.max_context, start + tokens);
}

void AddDecodeToken(StepShape& shape, int position) {
  shape.decode_tokens += 1;
  shape.decode_context += position + 1;
  shape.max_context = std::max(shape.max_context, position + 1);
}

double MeasuredCurve::At(int x, double y) const {
  if (points.empty()) return 0;
  double at_x = points.front().second;
  if (points.size() > 1) {
    // The segment holding x, or the nearest one at either end.
    auto hi = std::upper_bound(points.begin(), points.end(), x,
                               [](int v, const auto& p) { return v < p.first; });
    if (hi == points.begin()) ++hi;
    if (hi == points.end()) --hi;
    const auto lo = hi - 1;
    const double t = static_cast<double>(x - lo->first) / (hi->first - lo->first);
    at_x = std::max(0.0, lo->second + t * (hi->second - lo->second));
  }
  return at_x + per_context * y;
}

double SpreadFactor(const std::vector<double>& spread, double u) {
  if (spread.empty()) return 1;
  const double n = static_cast<double>(spread.size());
  // Quantile i sits at probability (i + 0.5) / n.
  const double at = std::clamp(u * n - 0.5, 0.0, n - 1);
  const auto lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, spread.size() - 1);
  return spread[lo] + (at - static_cast<double>(lo)) * (spread[hi] - spread[lo]);
}

double PerformanceProfile::StepSeconds(const StepShape& s) const {
  const double decode_work = decode.per_token * s.decode_tokens +
                             decode.per_context * static_cast<double>(s.decode_context);
  if (s.prompt_tokens > 0) {
    const double prompt_work =
        prefill_curve.empty()
            ? prefill.base + prefill.per_token * s.prompt_tokens +
                  prefill.per_context * static_cast<double>(s.prompt_attention)
            : prefill_curve.At(s.prompt_tokens, static_cast<double>(s.prompt_attention));
    return prompt_work + decode_work;
  }
  if (s.decode_tokens > 0) {
    return decode_curve.empty()
               ? decode.base + decode_work
               : decode_curve.At(s.decode_tokens, static_cast<double>(s.decode_context));
  }
  return 0;
}

std::string PerformanceProfile::OutsideRange(const StepShape& s) const {
  std::vector<std::string> out;
  if (s.prompt_tokens > range.prompt_tokens) {
    out.push_back(fmt::format("{} prompt tokens in a step (profiled up to {})", s.prompt_tokens,
                              range.prompt_tokens));
  }
  if (s.decode_tokens > range.decode_tokens) {
    out.push_back(
        fmt::format("a batch of {} (profiled up to {})", s.decode_tokens, range.decode_tokens));
  }
  if (s.max_context > range.max_context) {
    out.push_back(fmt::format("a context of {} tokens (profiled up to {})", s.max_context,
                              range.max_context));
  }
  std::string joined;
  for (const auto& o : out) joined += (joined.empty() ? "" : ", ") + o;
  return joined;
}

Result<PerformanceProfile> PerformanceProfile::FromJson(const json& j, const std::string& source) {
  if (!j.is_object()) return InvalidArgument(source + ": a profile must be a JSON object");
  PerformanceProfile p;
  for (auto [key, out] : std::initializer_list<std::pair<const char*, std::string*>>{
           {"name", &p.name},
           {"device", &p.device},
           {"device_name", &p.device_name},
           {"model_id", &p.model_id},
           {"dtype", &p.dtype},
           {"command", &p.command},
           {"date", &p.date},
           {"kv_bandwidth_source", &p.kv_bandwidth_source}}) {
    PDSERVE_RETURN_IF_ERROR(ReadString(j, key, out).WithContext(source));
  }
  if (auto it = j.find("model_shape"); it != j.end()) {
    if (!it->is_object()) return InvalidArgument(source + ": 'model_shape' must be an object");
    p.model_shape = *it;
  }
  PDSERVE_ASSIGN_OR_RETURN(p.prefill, ReadModel(j, "prefill", source));
  PDSERVE_ASSIGN_OR_RETURN(p.decode, ReadModel(j, "decode", source));
  PDSERVE_ASSIGN_OR_RETURN(p.prefill_curve, ReadCurve(j, "prefill_curve", source));
  PDSERVE_ASSIGN_OR_RETURN(p.decode_curve, ReadCurve(j, "decode_curve", source));
  auto range = j.find("range");
  if (range == j.end() || !range->is_object()) {
    return InvalidArgument(source + ": 'range' must be an object");
  }
  const std::string rs = source + ": range";
  PDSERVE_RETURN_IF_ERROR(ReadInt(*range, "prompt_tokens", rs, &p.range.prompt_tokens, 0));
  PDSERVE_RETURN_IF_ERROR(ReadInt(*range, "decode_tokens", rs, &p.range.decode_tokens, 0));
  PDSERVE_RETURN_IF_ERROR(ReadInt(*range, "max_context", rs, &p.range.max_context, 0));
  PDSERVE_RETURN_IF_ERROR(ReadNumber(j, "prefill_fit_error", source, &p.prefill_fit_error, false));
  PDSERVE_RETURN_IF_ERROR(ReadNumber(j, "decode_fit_error", source, &p.decode_fit_error, false));
  PDSERVE_RETURN_IF_ERROR(ReadInt(j, "samples", source, &p.samples, 0, false));
  PDSERVE_RETURN_IF_ERROR(ReadInt(j, "threads", source, &p.threads, 0, false));
  PDSERVE_RETURN_IF_ERROR(ReadNumber(j, "kv_bytes_per_token", source, &p.kv_bytes_per_token));
  PDSERVE_RETURN_IF_ERROR(ReadNumber(j, "kv_bytes_per_second", source, &p.kv_bytes_per_second));
  PDSERVE_RETURN_IF_ERROR(ReadInt(j, "n_layers", source, &p.n_layers, 1));
  PDSERVE_RETURN_IF_ERROR(ReadInt(j, "page_size", source, &p.page_size, 1));
  PDSERVE_RETURN_IF_ERROR(ReadInt(j, "kv_pages", source, &p.kv_pages, 1));
  PDSERVE_RETURN_IF_ERROR(ReadInt(j, "max_batch_tokens", source, &p.max_batch_tokens, 0, false));
  PDSERVE_RETURN_IF_ERROR(ReadNumber(j, "cold_start_seconds", source, &p.cold_start_seconds));
  PDSERVE_RETURN_IF_ERROR(
      ReadNumber(j, "decode_gap_seconds", source, &p.decode_gap_seconds, false));
  PDSERVE_ASSIGN_OR_RETURN(p.prefill_spread, ReadSpread(j, "prefill_spread", source));
  PDSERVE_ASSIGN_OR_RETURN(p.decode_spread, ReadSpread(j, "decode_spread", source));
  return p;
}

json PerformanceProfile::ToJson() const {
  json j = {{"name", name},
            {"device", device},
            {"device_name", device_name},
            {"model_id", model_id},
            {"model_shape", model_shape},
            {"dtype", dtype},
            {"threads", threads},
            {"command", command},
            {"date", date},
            {"prefill", ModelJson(prefill)},
            {"decode", ModelJson(decode)},
            {"range",
             {{"prompt_tokens", range.prompt_tokens},
              {"decode_tokens", range.decode_tokens},
              {"max_context", range.max_context}}},
            {"prefill_fit_error", prefill_fit_error},
            {"decode_fit_error", decode_fit_error},
            {"samples", samples},
            {"kv_bytes_per_token", kv_bytes_per_token},
            {"kv_bytes_per_second", kv_bytes_per_second},
            {"kv_bandwidth_source", kv_bandwidth_source},
            {"n_layers", n_layers},
            {"page_size", page_size},
            {"kv_pages", kv_pages},
            {"max_batch_tokens", max_batch_tokens},
            {"cold_start_seconds", cold_start_seconds}};
  if (decode_gap_seconds > 0) j["decode_gap_seconds"] = decode_gap_seconds;
  if (!prefill_spread.empty()) j["prefill_spread"] = prefill_spread;
  if (!decode_spread.empty()) j["decode_spread"] = decode_spread;
  if (!prefill_curve.empty()) j["prefill_curve"] = CurveJson(prefill_curve);
  if (!decode_curve.empty()) j["decode_curve"] = CurveJson(decode_curve);
  return j;
}

Result<PerformanceProfile> PerformanceProfile::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read profile " + path);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(path + ": not valid JSON");
  PDSERVE_ASSIGN_OR_RETURN(PerformanceProfile p, FromJson(j, path));
  if (p.name.empty()) p.name = std::filesystem::path(path).stem().string();
  return p;
}

Status PerformanceProfile::Save(const std::string& path) const {
  std::ofstream out(path);
  out << ToJson().dump(2) << "\n";
  out.close();
  if (!out) return Unavailable("cannot write profile " + path);
  return Status::Ok();
}

PerformanceProfile PerformanceProfile::Zero() {
  PerformanceProfile p;
  p.name = "zero";
  p.device = "sim";
  p.command = "built in: every step and transfer takes no time";
  p.range = {1 << 30, 1 << 30, 1 << 30};
  // Room for a million tokens (at 16 a page), yet little enough that hundreds of simulated
  // workers in one process do not each clear the per-page state of a pool and prefix cache of a
  // million pages (scripts/sim-scale's 256 workers held about 7 GB that way).
  p.kv_pages = 1 << 16;
  return p;
}

Result<LinearStepModel> FitLinearStepModel(const std::vector<double>& x,
                                           const std::vector<double>& y,
                                           const std::vector<double>& seconds) {
  const size_t n = seconds.size();
  if (x.size() != n || y.size() != n) return InvalidArgument("fit: columns of different lengths");
  if (n < 3) return InvalidArgument(fmt::format("fit: {} samples; at least 3 are needed", n));
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i]) || !std::isfinite(seconds[i])) {
      return InvalidArgument("fit: a sample is not finite");
    }
  }
  // Features: 0 = 1 (base), 1 = x, 2 = y. Drop the most negative coefficient until none is.
  std::vector<int> features = {0, 1, 2};
  auto feature = [&](int f, size_t i) { return f == 0 ? 1.0 : f == 1 ? x[i] : y[i]; };
  while (!features.empty()) {
    const int k = static_cast<int>(features.size());
    std::array<std::array<double, 3>, 3> a{};
    std::array<double, 3> b{}, c{};
    for (size_t i = 0; i < n; ++i) {
      // Relative errors: each step weighs by its time's inverse square, so that short steps
      // (a decode step, a short prompt) are fitted as closely as long ones.
      const double w = seconds[i] > 0 ? 1.0 / (seconds[i] * seconds[i]) : 1.0;
      for (int r = 0; r < k; ++r) {
        for (int col = 0; col < k; ++col) {
          a[r][col] += w * feature(features[r], i) * feature(features[col], i);
        }
        b[r] += w * feature(features[r], i) * seconds[i];
      }
    }
    int worst = -1;
    if (Solve(a, b, k, &c)) {
      for (int r = 0; r < k; ++r) {
        if (c[r] < 0 && (worst < 0 || c[r] < c[worst])) worst = r;
      }
      if (worst < 0) {
        LinearStepModel m;
        for (int r = 0; r < k; ++r) {
          (features[r] == 0 ? m.base : features[r] == 1 ? m.per_token : m.per_context) = c[r];
        }
        return m;
      }
    } else {
      // A feature that never varies (all x equal, say) makes the system singular: drop the
      // last one and try again.
      worst = k - 1;
    }
    features.erase(features.begin() + worst);
  }
  return LinearStepModel{};
}

Result<MeasuredCurve> FitMeasuredCurve(const std::vector<double>& x, const std::vector<double>& y,
                                       const std::vector<double>& seconds) {
  const size_t n = seconds.size();
  if (x.size() != n || y.size() != n) return InvalidArgument("fit: columns of different lengths");
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i]) || !std::isfinite(seconds[i]) || x[i] < 1) {
      return InvalidArgument("fit: a sample is not finite, or its count is below 1");
    }
  }
  // Each step's weight is its time's inverse square (relative errors), as in the linear fit.
  struct Group {
    double w = 0, wy = 0, ws = 0;  // sums of w, w*y, w*seconds
  };
  std::map<int, Group> groups;
  auto weight = [&](size_t i) { return seconds[i] > 0 ? 1.0 / (seconds[i] * seconds[i]) : 1.0; };
  for (size_t i = 0; i < n; ++i) {
    Group& g = groups[static_cast<int>(x[i])];
    const double w = weight(i);
    g.w += w;
    g.wy += w * y[i];
    g.ws += w * seconds[i];
  }
  MeasuredCurve curve;
  if (groups.size() < 2) return curve;
  // The slope: y's covariance with time over its variance, each taken about its group's mean
  // (what varies within a group is y alone).
  double cov = 0, var = 0;
  for (size_t i = 0; i < n; ++i) {
    const Group& g = groups.at(static_cast<int>(x[i]));
    const double dy = y[i] - g.wy / g.w, w = weight(i);
    cov += w * dy * (seconds[i] - g.ws / g.w);
    var += w * dy * dy;
  }
  curve.per_context = var > 0 ? std::max(0.0, cov / var) : 0;
  for (const auto& [count, g] : groups) {
    curve.points.emplace_back(count, std::max(0.0, (g.ws - curve.per_context * g.wy) / g.w));
  }
  return curve;
}

Status FitProfile(const std::vector<StepSample>& steps, PerformanceProfile* profile) {
  std::vector<double> px, py, ps, dx, dy, ds;
  ProfiledRange range;
  for (const StepSample& s : steps) {
    if (s.shape.prompt_tokens > 0) {
      // The sweep measures prompt-only steps; a mixed step's decode tokens would be fitted
      // into the prefill slopes here.
      px.push_back(s.shape.prompt_tokens);
      py.push_back(static_cast<double>(s.shape.prompt_attention));
      ps.push_back(s.seconds);
    } else if (s.shape.decode_tokens > 0) {
      dx.push_back(s.shape.decode_tokens);
      dy.push_back(static_cast<double>(s.shape.decode_context));
      ds.push_back(s.seconds);
    }
    range.prompt_tokens = std::max(range.prompt_tokens, s.shape.prompt_tokens);
    range.decode_tokens = std::max(range.decode_tokens, s.shape.decode_tokens);
    range.max_context = std::max(range.max_context, s.shape.max_context);
  }
  auto prefill = FitLinearStepModel(px, py, ps);
  if (!prefill.ok()) return InvalidArgument("prefill steps: " + prefill.status().message());
  auto decode = FitLinearStepModel(dx, dy, ds);
  if (!decode.ok()) return InvalidArgument("decode steps: " + decode.status().message());
  profile->prefill = *prefill;
  profile->decode = *decode;
  PDSERVE_ASSIGN_OR_RETURN(profile->prefill_curve, FitMeasuredCurve(px, py, ps));
  PDSERVE_ASSIGN_OR_RETURN(profile->decode_curve, FitMeasuredCurve(dx, dy, ds));
  std::vector<double> perr, derr;
  for (size_t i = 0; i < ps.size(); ++i) {
    StepShape s;
    s.prompt_tokens = static_cast<int>(px[i]);
    s.prompt_attention = static_cast<int64_t>(py[i]);
    perr.push_back(std::fabs(profile->StepSeconds(s) - ps[i]) / ps[i]);
  }
  for (size_t i = 0; i < ds.size(); ++i) {
    StepShape s;
    s.decode_tokens = static_cast<int>(dx[i]);
    s.decode_context = static_cast<int64_t>(dy[i]);
    derr.push_back(std::fabs(profile->StepSeconds(s) - ds[i]) / ds[i]);
  }
  profile->prefill_fit_error = Median(perr);
  profile->decode_fit_error = Median(derr);
  profile->range = range;
  profile->samples = static_cast<int>(steps.size());
  return Status::Ok();
}

Result<PerformanceProfile> FindProfile(const std::string& name_or_path) {
  if (name_or_path == "zero") return PerformanceProfile::Zero();
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_path, ec)) {
    return PerformanceProfile::Load(name_or_path);
  }
  std::string looked;
  if (name_or_path.find('/') == std::string::npos) {
    for (const auto& dir : ProfileDirectories()) {
      const auto path = dir / (name_or_path + ".json");
      if (std::filesystem::is_regular_file(path, ec)) return PerformanceProfile::Load(path);
      looked += " " + path.string();
    }
  }
  return NotFound("no profile '" + name_or_path + "' (a file, 'zero', or a name looked up as" +
                  (looked.empty() ? std::string(" a path") : looked) + ")");
}

}  // namespace pdserve::model
