// Builds the cost report from ledger rows and periods; see cost_report.h for the definitions.
#include "ledger/cost_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

namespace pdserve::ledger {
namespace {

using Json = nlohmann::json;

// A capacity class as the report's sections key it.
std::string ClassKey(const WorkerRef& w) { return std::string(ToString(w.capacity_class)); }

void AddRow(const AttemptRow& r, ReportSection* s) {
  s->predictions.Add(r);
  if (r.status == AttemptStatus::kRefused) return;  // it never ran: no cost, no attempt
  const AttemptCost& c = r.cost;  // as the gateway priced it: the report never re-prices
  if (r.decode_worker.capacity_class == CapacityClass::kApi) {
    ExternalFigures& e = s->external[r.decode_worker.name];
    if (IsAcceptedStatus(r.status)) {
      ++e.requests;
      e.input_tokens += r.prompt_tokens;
      e.cached_input_tokens += std::clamp<int64_t>(r.cached_prompt_tokens, 0, r.prompt_tokens);
      e.output_tokens += r.completion_tokens;
      e.cost_usd += c.total();
    } else {
      ++e.failed_attempts;
      e.wasted_usd += c.total();
    }
    return;
  }
  const bool prefilled = r.prefill_worker.id != 0, decoded = r.decode_worker.id != 0;
  ++s->attempts;
  s->egress_usd += c.egress_usd;
  if (!IsAcceptedStatus(r.status)) {
    ++s->failed_attempts;
    s->retry_waste_usd += c.total();
    if (prefilled) s->classes[ClassKey(r.prefill_worker)].wasted_usd += c.prefill_compute_usd;
    if (decoded) s->classes[ClassKey(r.decode_worker)].wasted_usd += c.decode_compute_usd;
    return;
  }
  ++s->requests;
  ++s->classes[ClassKey(decoded ? r.decode_worker : r.prefill_worker)].requests;
  s->request_usd += c.total();
  s->input_tokens += r.prompt_tokens;
  s->output_tokens += r.completion_tokens;
  const bool reserved_in = prefilled && r.prefill_worker.capacity_class == CapacityClass::kReserved;
  const bool reserved_out = decoded && r.decode_worker.capacity_class == CapacityClass::kReserved;
  if (prefilled) {
    ClassFigures& f = s->classes[ClassKey(r.prefill_worker)];
    f.prefill_usd += c.prefill_compute_usd;
    f.input_tokens += r.prompt_tokens;
    s->prompt_cache.Add(r);
  }
  if (decoded) {
    ClassFigures& f = s->classes[ClassKey(r.decode_worker)];
    f.decode_usd += c.decode_compute_usd;
    f.output_tokens += r.completion_tokens;
  }
  for (ApiFigures& api : s->apis) {
    const double in =
        ApiTokensCostUsd(r.prompt_tokens, r.cached_prompt_tokens, 0, api.price.input_cost_per_token,
                         api.price.cached_input_cost_per_token(), 0);
    const double out = r.completion_tokens * api.price.output_cost_per_token;
    api.api_cost_usd += in + out;
    api.reserved_api_usd += (reserved_in ? in : 0) + (reserved_out ? out : 0);
  }
}

ReportSection EmptySection(const std::vector<ApiPrice>& apis, bool allocated) {
  ReportSection s;
  s.allocated = allocated;
  for (const ApiPrice& p : apis) s.apis.push_back({p, 0, 0});
  return s;
}

double ComputeUsage(const ClassFigures& f) { return f.prefill_usd + f.decode_usd + f.wasted_usd; }

// A tenant's or group's share of the fleet's capacity and idle, class by class.
void Allocate(const ReportSection& fleet, ReportSection* s) {
  for (auto& [name, f] : s->classes) {
    auto it = fleet.classes.find(name);
    if (it == fleet.classes.end()) continue;
    const double usage = ComputeUsage(it->second);
    const double share = usage > 0 ? ComputeUsage(f) / usage : 0;
    f.capacity_usd = it->second.capacity_usd * share;
    f.idle_usd = it->second.idle_usd * share;
    s->capacity_usd += f.capacity_usd;
    s->idle_usd += f.idle_usd;
  }
}

// Adds `amount` to the buckets in proportion to their overlap with [a, b] (all of it to the
// bucket holding `a` when the interval is empty).
void Spread(double a, double b, double amount, std::vector<UtilisationBucket>* buckets) {
  if (buckets->empty() || amount == 0) return;
  if (b <= a) {
    for (auto& k : *buckets) {
      if (a >= k.start_unix && a < k.end_unix) k.busy_gpu_seconds += amount;
    }
    return;
  }
  for (auto& k : *buckets) {
    const double overlap = std::min(b, k.end_unix) - std::max(a, k.start_unix);
    if (overlap > 0) k.busy_gpu_seconds += amount * overlap / (b - a);
  }
}

std::vector<UtilisationBucket> Utilisation(const std::vector<AttemptRow>& rows,
                                           const std::vector<WorkerPeriod>& periods,
                                           const ReportOptions& o) {
  if (periods.empty() || o.utilisation_buckets <= 0) return {};
  double from = periods.front().start_unix, to = periods.front().end_unix;
  for (const auto& p : periods) {
    from = std::min(from, p.start_unix);
    to = std::max(to, p.end_unix);
  }
  if (o.from_unix) from = std::max(from, *o.from_unix);
  if (o.to_unix) to = std::min(to, *o.to_unix);
  if (to <= from) return {};
  std::vector<UtilisationBucket> buckets(o.utilisation_buckets);
  const double width = (to - from) / o.utilisation_buckets;
  for (int i = 0; i < o.utilisation_buckets; ++i) {
    buckets[i].start_unix = from + i * width;
    buckets[i].end_unix = i + 1 == o.utilisation_buckets ? to : from + (i + 1) * width;
  }
  for (const auto& p : periods) {
    for (auto& k : buckets) {
      const double overlap =
          std::min(p.end_unix, k.end_unix) - std::max(p.start_unix, k.start_unix);
      if (overlap > 0) k.uptime_gpu_seconds += overlap * p.worker.gpu_count;
    }
  }
  for (const auto& r : rows) {
    const double first = r.first_token_unix > 0 ? r.first_token_unix : r.end_unix;
    Spread(r.arrival_unix, first, r.prefill_step_seconds * r.prefill_worker.gpu_count, &buckets);
    Spread(first, r.end_unix, r.decode_step_seconds * r.decode_worker.gpu_count, &buckets);
  }
  return buckets;
}

bool Matches(const AttemptRow& r, const ReportOptions& o) {
  if (o.tenant && r.tenant != *o.tenant) return false;
  for (const auto& [key, value] : o.tags) {
    auto it = r.tags.find(key);
    if (it == r.tags.end() || it->second != value) return false;
  }
  return true;
}

using WorkerKey = std::tuple<uint64_t, std::string>;

WorkerFigures& WorkerEntry(std::map<WorkerKey, WorkerFigures>& workers, const WorkerRef& w) {
  WorkerFigures& f = workers[{w.id, w.name}];
  if (f.worker.id == 0) f.worker = w;
  return f;
}

}  // namespace

std::optional<double> PerMillion(double usd, int64_t tokens) {
  if (tokens <= 0) return std::nullopt;
  return usd / static_cast<double>(tokens) * 1e6;
}

BreakEven ReservedBreakEven(const ReportSection& section, const ApiFigures& api) {
  BreakEven b;
  auto it = section.classes.find(std::string(ToString(CapacityClass::kReserved)));
  if (it == section.classes.end() || api.reserved_api_usd <= 0) return b;
  b.utilisation = (it->second.prefill_usd + it->second.decode_usd) / api.reserved_api_usd;
  b.never = *b.utilisation > 1;
  return b;
}

ClassFigures Blended(const ReportSection& section) {
  ClassFigures sum;
  for (const auto& [name, f] : section.classes) {
    sum.requests += f.requests;
    sum.prefill_usd += f.prefill_usd;
    sum.decode_usd += f.decode_usd;
    sum.wasted_usd += f.wasted_usd;
    sum.input_tokens += f.input_tokens;
    sum.output_tokens += f.output_tokens;
    sum.capacity_usd += f.capacity_usd;
    sum.idle_usd += f.idle_usd;
    sum.uptime_gpu_seconds += f.uptime_gpu_seconds;
    sum.busy_gpu_seconds += f.busy_gpu_seconds;
  }
  return sum;
}

std::vector<MixEntry> Mix(const ReportSection& section) {
  std::vector<MixEntry> mix;
  int64_t requests = 0;
  for (const auto& [name, f] : section.classes) {
    if (f.requests == 0) continue;
    mix.push_back({name, f.requests, f.input_tokens, f.output_tokens, f.capacity_usd, 0});
    requests += f.requests;
  }
  for (const auto& [name, e] : section.external) {
    if (e.requests == 0 && e.failed_attempts == 0) continue;
    mix.push_back(
        {"api " + name, e.requests, e.input_tokens, e.output_tokens, e.cost_usd + e.wasted_usd, 0});
    requests += e.requests;
  }
  for (MixEntry& m : mix) {
    m.request_share = requests > 0 ? static_cast<double>(m.requests) / requests : 0;
  }
  return mix;
}

OnBurst ExternalOnBurst(const ReportSection& section, const ExternalFigures& external) {
  OnBurst on;
  auto it = section.classes.find(std::string(ToString(CapacityClass::kBurst)));
  if (it == section.classes.end()) return on;
  const ClassFigures& b = it->second;
  // A kind of token the upstream served that burst did not has no burst rate to price it at.
  if ((external.input_tokens > 0 && b.input_tokens == 0) ||
      (external.output_tokens > 0 && b.output_tokens == 0)) {
    return on;
  }
  auto rate = [](double usd, int64_t tokens) { return tokens > 0 ? usd / tokens : 0.0; };
  on.compute_usd = external.input_tokens * rate(b.prefill_usd, b.input_tokens) +
                   external.output_tokens * rate(b.decode_usd, b.output_tokens);
  const double compute = b.prefill_usd + b.decode_usd;
  const double input_share = compute > 0 ? b.prefill_usd / compute : 0;
  on.fully_loaded_usd =
      external.input_tokens * rate(b.capacity_usd * input_share, b.input_tokens) +
      external.output_tokens * rate(b.capacity_usd * (1 - input_share), b.output_tokens);
  return on;
}

CostReport BuildCostReport(const std::vector<AttemptRow>& rows,
                           const std::vector<WorkerPeriod>& periods,
                           const std::vector<ApiPrice>& apis, const ReportOptions& options) {
  CostReport report;
  report.options = options;
  report.apis = apis;
  report.overall = EmptySection(apis, false);
  std::map<WorkerKey, WorkerFigures> workers;

  for (const WorkerPeriod& p : periods) {
    const double start =
        options.from_unix ? std::max(p.start_unix, *options.from_unix) : p.start_unix;
    const double end = options.to_unix ? std::min(p.end_unix, *options.to_unix) : p.end_unix;
    const double uptime = std::max(0.0, end - start), length = p.end_unix - p.start_unix;
    const double busy = length > 0 ? p.busy_seconds * uptime / length : 0;
    ClassFigures& f = report.overall.classes[ClassKey(p.worker)];
    f.capacity_usd += ComputeCostUsd(uptime, p.worker);
    f.idle_usd += ComputeCostUsd(uptime - busy, p.worker);
    f.uptime_gpu_seconds += uptime * p.worker.gpu_count;
    f.busy_gpu_seconds += busy * p.worker.gpu_count;
    WorkerFigures& w = WorkerEntry(workers, p.worker);
    w.uptime_seconds += uptime;
    w.busy_seconds += busy;
    w.capacity_usd += ComputeCostUsd(uptime, p.worker);
    w.idle_usd += ComputeCostUsd(uptime - busy, p.worker);
  }
  for (const auto& [name, f] : report.overall.classes) {
    report.overall.capacity_usd += f.capacity_usd;
    report.overall.idle_usd += f.idle_usd;
  }

  const bool filtered = options.tenant || !options.tags.empty();
  if (filtered) report.selection = EmptySection(apis, true);
  for (const AttemptRow& r : rows) {
    AddRow(r, &report.overall);
    const bool accepted = IsAcceptedStatus(r.status);
    if (r.prefill_worker.id != 0) {
      WorkerFigures& w = WorkerEntry(workers, r.prefill_worker);
      (accepted ? w.request_usd : w.retry_waste_usd) += r.cost.prefill_compute_usd;
    }
    if (r.decode_worker.id != 0) {
      WorkerFigures& w = WorkerEntry(workers, r.decode_worker);
      (accepted ? w.request_usd : w.retry_waste_usd) += r.cost.decode_compute_usd;
    }
    if (!Matches(r, options)) continue;
    auto tenant = report.tenants.try_emplace(r.tenant, EmptySection(apis, true)).first;
    AddRow(r, &tenant->second);
    if (report.selection) AddRow(r, &*report.selection);
    if (options.group_by_tag) {
      auto tag = r.tags.find(*options.group_by_tag);
      const std::string value = tag == r.tags.end() ? "" : tag->second;
      AddRow(r, &report.groups.try_emplace(value, EmptySection(apis, true)).first->second);
    }
  }
  for (auto& [name, s] : report.tenants) Allocate(report.overall, &s);
  for (auto& [name, s] : report.groups) Allocate(report.overall, &s);
  if (report.selection) Allocate(report.overall, &*report.selection);
  for (auto& [key, w] : workers) report.workers.push_back(std::move(w));
  report.utilisation = Utilisation(rows, periods, options);
  return report;
}

// Writers.

namespace {

Json Optional(std::optional<double> v) { return v ? Json(*v) : Json(nullptr); }

Json PerMillionJson(const ClassFigures& f) {
  const double compute = f.prefill_usd + f.decode_usd;
  const double input_share = compute > 0 ? f.prefill_usd / compute : 0;
  return {
      {"input_usd", Optional(PerMillion(f.prefill_usd, f.input_tokens))},
      {"output_usd", Optional(PerMillion(f.decode_usd, f.output_tokens))},
      {"fully_loaded_usd", Optional(PerMillion(f.capacity_usd, f.input_tokens + f.output_tokens))},
      {"fully_loaded_input_usd",
       Optional(compute > 0 ? PerMillion(f.capacity_usd * input_share, f.input_tokens)
                            : std::nullopt)},
      {"fully_loaded_output_usd",
       Optional(compute > 0 ? PerMillion(f.capacity_usd * (1 - input_share), f.output_tokens)
                            : std::nullopt)}};
}

Json ClassJson(const ClassFigures& f, bool fleet) {
  Json j = {{"requests", f.requests},
            {"prefill_compute_usd", f.prefill_usd},
            {"decode_compute_usd", f.decode_usd},
            {"retry_compute_usd", f.wasted_usd},
            {"input_tokens", f.input_tokens},
            {"output_tokens", f.output_tokens},
            {"capacity_cost_usd", f.capacity_usd},
            {"idle_waste_usd", f.idle_usd}};
  if (fleet) {
    j["uptime_gpu_seconds"] = f.uptime_gpu_seconds;
    j["busy_gpu_seconds"] = f.busy_gpu_seconds;
    j["utilisation"] =
        Optional(f.uptime_gpu_seconds > 0 ? std::optional(f.busy_gpu_seconds / f.uptime_gpu_seconds)
                                          : std::nullopt);
  }
  return j;
}

Json SectionJson(const ReportSection& s) {
  Json j = {{"requests", s.requests},
            {"attempts", s.attempts},
            {"failed_attempts", s.failed_attempts},
            {"input_tokens", s.input_tokens},
            {"output_tokens", s.output_tokens},
            {"capacity_cost_usd", s.capacity_usd},
            {"request_cost_usd", s.request_usd},
            {"retry_waste_usd", s.retry_waste_usd},
            {"idle_waste_usd", s.idle_usd},
            {"egress_cost_usd", s.egress_usd},
            {"allocated", s.allocated}};
  if (!s.allocated) {
    j["conservation_residual_usd"] =
        s.capacity_usd + s.egress_usd - s.request_usd - s.retry_waste_usd - s.idle_usd;
  }
  Json per_million = Json::object(), classes = Json::object();
  for (const auto& [name, f] : s.classes) {
    per_million[name] = PerMillionJson(f);
    classes[name] = ClassJson(f, !s.allocated);
  }
  const ClassFigures blended = Blended(s);
  per_million["blended"] = PerMillionJson(blended);
  classes["blended"] = ClassJson(blended, !s.allocated);
  j["per_1m_tokens"] = per_million;
  j["classes"] = classes;
  Json apis = Json::object();
  for (const ApiFigures& a : s.apis) {
    const BreakEven b = ReservedBreakEven(s, a);
    apis[a.price.name] = {{"provider", a.price.provider},
                          {"api_cost_usd", a.api_cost_usd},
                          {"reserved_tokens_api_cost_usd", a.reserved_api_usd},
                          {"input_per_1m_usd", a.price.input_cost_per_token * 1e6},
                          {"output_per_1m_usd", a.price.output_cost_per_token * 1e6},
                          {"cached_input_per_1m_usd", a.price.cached_input_cost_per_token() * 1e6},
                          {"break_even_reserved_utilisation", Optional(b.utilisation)},
                          {"never_breaks_even", b.never}};
  }
  j["apis"] = apis;
  Json external = Json::object();
  for (const auto& [name, e] : s.external) {
    const OnBurst on = ExternalOnBurst(s, e);
    external[name] = {{"requests", e.requests},
                      {"failed_attempts", e.failed_attempts},
                      {"input_tokens", e.input_tokens},
                      {"cached_input_tokens", e.cached_input_tokens},
                      {"output_tokens", e.output_tokens},
                      {"cost_usd", e.cost_usd},
                      {"retry_waste_usd", e.wasted_usd},
                      {"on_burst_compute_usd", Optional(on.compute_usd)},
                      {"on_burst_fully_loaded_usd", Optional(on.fully_loaded_usd)}};
  }
  j["external_apis"] = external;
  j["prompt_cache"] = PromptCacheJson(s.prompt_cache);
  Json mix = Json::object();
  for (const MixEntry& m : Mix(s)) {
    mix[m.option] = {{"requests", m.requests},
                     {"input_tokens", m.input_tokens},
                     {"output_tokens", m.output_tokens},
                     {"cost_usd", m.cost_usd},
                     {"request_share", m.request_share}};
  }
  j["mix"] = mix;
  return j;
}

Json SectionsJson(const std::map<std::string, ReportSection>& sections) {
  Json j = Json::object();
  for (const auto& [name, s] : sections) j[name] = SectionJson(s);
  return j;
}

std::string Usd(double v) { return fmt::format("${:.6f}", v); }
std::string UsdOrDash(std::optional<double> v) {
  return v ? fmt::format("${:.4f}", *v) : std::string("-");
}
std::string Percent(std::optional<double> v) {
  return v ? fmt::format("{:.1f}%", *v * 100) : std::string("-");
}

void SectionTable(const std::string& title, const ReportSection& s, std::string* out) {
  *out += fmt::format("{}: {} requests ({} attempts, {} failed), {} input and {} output tokens\n",
                      title, s.requests, s.attempts, s.failed_attempts, s.input_tokens,
                      s.output_tokens);
  const char* alloc = s.allocated ? " (allocated share)" : "";
  *out += fmt::format("  capacity cost   {:>14}{}\n", Usd(s.capacity_usd), alloc);
  *out += fmt::format("  request cost    {:>14}\n", Usd(s.request_usd));
  *out += fmt::format("  retry waste     {:>14}\n", Usd(s.retry_waste_usd));
  *out += fmt::format("  idle waste      {:>14}{}\n", Usd(s.idle_usd), alloc);
  if (s.egress_usd > 0) *out += fmt::format("  egress          {:>14}\n", Usd(s.egress_usd));
  *out += PromptCacheLine(s.prompt_cache);
  *out += PredictionsLines(s.predictions);
  *out += fmt::format("  {:<24}{:>12}{:>12}{:>14}   {}\n", "per 1M tokens", "input", "output",
                      "fully loaded", "(in / out)");
  auto line = [&](const std::string& name, const ClassFigures& f) {
    const Json j = PerMillionJson(f);
    auto get = [&](const char* k) {
      return j[k].is_null() ? std::optional<double>() : std::optional(j[k].get<double>());
    };
    *out += fmt::format("  {:<24}{:>12}{:>12}{:>14}   {}\n", name, UsdOrDash(get("input_usd")),
                        UsdOrDash(get("output_usd")), UsdOrDash(get("fully_loaded_usd")),
                        UsdOrDash(get("fully_loaded_input_usd")) + " / " +
                            UsdOrDash(get("fully_loaded_output_usd")));
  };
  for (const auto& [name, f] : s.classes) line(name, f);
  line("blended", Blended(s));
  for (const ApiFigures& a : s.apis) {
    const BreakEven b = ReservedBreakEven(s, a);
    *out +=
        fmt::format("  {:<24}{:>12}{:>12}   these tokens {}, break-even reserved utilisation {}\n",
                    "api " + a.price.name, UsdOrDash(a.price.input_cost_per_token * 1e6),
                    UsdOrDash(a.price.output_cost_per_token * 1e6), Usd(a.api_cost_usd),
                    b.never ? std::string("never") : Percent(b.utilisation));
  }
  *out += "\n";
}

}  // namespace

nlohmann::json ReportPredictionsJson(const CostReport& r) {
  Json j = PredictionsJson(r.overall.predictions);
  Json by_tenant = Json::object();
  for (const auto& [name, s] : r.tenants) by_tenant[name] = PredictionsJson(s.predictions);
  j["by_tenant"] = by_tenant;
  return j;
}

nlohmann::json CostReportJson(const CostReport& r) {
  const ReportOptions& o = r.options;
  Json window = {{"from_unix", Optional(o.from_unix)}, {"to_unix", Optional(o.to_unix)}};
  if (o.from_unix) window["from"] = FormatUnixTime(*o.from_unix);
  if (o.to_unix) window["to"] = FormatUnixTime(*o.to_unix);
  Json filter = {{"tenant", o.tenant ? Json(*o.tenant) : Json(nullptr)},
                 {"tags", o.tags},
                 {"group_by_tag", o.group_by_tag ? Json(*o.group_by_tag) : Json(nullptr)}};
  Json apis = Json::array();
  for (const ApiPrice& p : r.apis) {
    apis.push_back({{"name", p.name},
                    {"provider", p.provider},
                    {"input_cost_per_token", p.input_cost_per_token},
                    {"output_cost_per_token", p.output_cost_per_token},
                    {"cache_read_input_token_cost", p.cached_input_cost_per_token()}});
  }
  Json workers = Json::array();
  for (const WorkerFigures& w : r.workers) {
    workers.push_back({{"id", w.worker.id},
                       {"name", w.worker.name},
                       {"role", w.worker.role},
                       {"capacity_class", ClassKey(w.worker)},
                       {"zone", w.worker.zone},
                       {"gpu_count", w.worker.gpu_count},
                       {"price_per_gpu_hour", w.worker.price_per_gpu_hour},
                       {"uptime_seconds", w.uptime_seconds},
                       {"busy_seconds", w.busy_seconds},
                       {"capacity_cost_usd", w.capacity_usd},
                       {"request_cost_usd", w.request_usd},
                       {"retry_waste_usd", w.retry_waste_usd},
                       {"idle_waste_usd", w.idle_usd},
                       {"conservation_residual_usd",
                        w.capacity_usd - w.request_usd - w.retry_waste_usd - w.idle_usd}});
  }
  Json utilisation = Json::array();
  for (const UtilisationBucket& b : r.utilisation) {
    utilisation.push_back(
        {{"start_unix", b.start_unix},
         {"end_unix", b.end_unix},
         {"uptime_gpu_seconds", b.uptime_gpu_seconds},
         {"busy_gpu_seconds", b.busy_gpu_seconds},
         {"utilisation", Optional(b.uptime_gpu_seconds > 0
                                      ? std::optional(b.busy_gpu_seconds / b.uptime_gpu_seconds)
                                      : std::nullopt)}});
  }
  Json j = {{"window", window},
            {"filter", filter},
            {"apis", apis},
            {"overall", SectionJson(r.overall)},
            {"tenants", SectionsJson(r.tenants)},
            {"workers", workers},
            {"utilisation_over_time", utilisation},
            {"predictions", ReportPredictionsJson(r)},
            {"notes",
             {"overall covers every row and worker in the window; filters apply to the "
              "tenant, selection and group sections",
              "capacity and idle belong to workers: in tenant, selection and group sections "
              "they are the fleet's allocated by share of compute (allocated: true)",
              "request_cost_usd: accepted attempts (ok, cancelled); retry_waste_usd: failed "
              "attempts (retried, error); see ledger/cost_report.h for every definition",
              std::string(kPromptCacheSavingNote),
              "predictions: admission's predicted TTFT and queue wait against the measured "
              "ones (error = predicted - measured); see ledger/prediction_figures.h"}}};
  if (r.selection) j["selection"] = SectionJson(*r.selection);
  if (o.group_by_tag) j["groups"] = SectionsJson(r.groups);
  return j;
}

std::string CostReportTable(const CostReport& r) {
  std::string out = "pdserve cost report";
  if (r.options.from_unix) out += " from " + FormatUnixTime(*r.options.from_unix);
  if (r.options.to_unix) out += " to " + FormatUnixTime(*r.options.to_unix);
  out += "\n\n";
  SectionTable("Overall", r.overall, &out);
  if (r.selection) SectionTable("Selection (--tenant/--tag)", *r.selection, &out);
  for (const auto& [name, s] : r.tenants) SectionTable("Tenant " + name, s, &out);
  for (const auto& [value, s] : r.groups) {
    SectionTable("Tag " + *r.options.group_by_tag + "=" + value, s, &out);
  }
  const std::vector<MixEntry> mix = Mix(r.overall);
  if (!mix.empty()) {
    out += fmt::format("{:<24}{:>10}{:>8}{:>12}{:>12}{:>14}\n", "Mix (accepted requests)",
                       "requests", "share", "input tok", "output tok", "cost");
    for (const MixEntry& m : mix) {
      out +=
          fmt::format("{:<24}{:>10}{:>8}{:>12}{:>12}{:>14}\n", m.option, m.requests,
                      Percent(m.request_share), m.input_tokens, m.output_tokens, Usd(m.cost_usd));
    }
    out +=
        "  (a class's cost is its capacity, idle and cold starts included; an API's, its rows)\n\n";
  }
  if (!r.overall.external.empty()) {
    out += fmt::format("{:<24}{:>10}{:>10}{:>12}{:>12}{:>12}{:>14}{:>14}{:>16}{:>16}\n",
                       "External APIs (served)", "requests", "failed", "input tok", "cached tok",
                       "output tok", "cost", "retry waste", "on burst", "burst loaded");
    for (const auto& [name, e] : r.overall.external) {
      const OnBurst on = ExternalOnBurst(r.overall, e);
      out += fmt::format("{:<24}{:>10}{:>10}{:>12}{:>12}{:>12}{:>14}{:>14}{:>16}{:>16}\n", name,
                         e.requests, e.failed_attempts, e.input_tokens, e.cached_input_tokens,
                         e.output_tokens, Usd(e.cost_usd), Usd(e.wasted_usd),
                         UsdOrDash(on.compute_usd), UsdOrDash(on.fully_loaded_usd));
    }
    out +=
        "  on burst: the same tokens at burst's compute cost per token in this window; burst "
        "loaded: at its capacity cost per accepted token ('-': burst served none)\n\n";
  }
  out += fmt::format("{:<24}{:>8}{:>12}{:>12}{:>8}{:>14}{:>14}{:>14}\n", "Workers", "class",
                     "uptime s", "busy s", "util", "capacity", "idle waste", "retry waste");
  for (const WorkerFigures& w : r.workers) {
    out +=
        fmt::format("{:<24}{:>8}{:>12.1f}{:>12.1f}{:>8}{:>14}{:>14}{:>14}\n", w.worker.name,
                    ClassKey(w.worker), w.uptime_seconds, w.busy_seconds,
                    Percent(w.uptime_seconds > 0 ? std::optional(w.busy_seconds / w.uptime_seconds)
                                                 : std::nullopt),
                    Usd(w.capacity_usd), Usd(w.idle_usd), Usd(w.retry_waste_usd));
  }
  return out;
}

}  // namespace pdserve::ledger
