// `pdserve ledger export` (rows as CSV or JSON, filtered by tenant, time and tags) and
// `pdserve ledger forget --tenant T` (deletes a tenant's rows, prints how many). Also the
// row-filter flags and the output writer that `pdserve report` shares (commands.h).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "common/json_text.h"
#include "gateway/request_tags.h"
#include "ledger/cost_report.h"

namespace pdserve::app {

void AddLedgerFilterFlags(CLI::App& cmd, LedgerFilterFlags& flags) {
  cmd.add_option("--tenant", flags.tenant, "only this tenant's rows");
  cmd.add_option("--from", flags.from,
                 "rows that ended at or after this time (unix seconds or 2026-11-29T10:00:00Z)");
  cmd.add_option("--to", flags.to, "rows that ended before this time");
  cmd.add_option("--tag", flags.tags, "only rows with this tag, key=value (repeatable)");
}

Result<ledger::LedgerFilter> ParseLedgerFilterFlags(const LedgerFilterFlags& flags) {
  ledger::LedgerFilter filter;
  if (!flags.tenant.empty()) filter.tenant = flags.tenant;
  if (!flags.from.empty()) {
    PDSERVE_ASSIGN_OR_RETURN(double from, ledger::ParseTimeArg(flags.from));
    filter.from_unix = from;
  }
  if (!flags.to.empty()) {
    PDSERVE_ASSIGN_OR_RETURN(double to, ledger::ParseTimeArg(flags.to));
    filter.to_unix = to;
  }
  if (filter.from_unix && filter.to_unix && *filter.to_unix <= *filter.from_unix) {
    return InvalidArgument("--to must be after --from");
  }
  for (const std::string& text : flags.tags) {
    PDSERVE_ASSIGN_OR_RETURN(auto tags, gateway::ParseTags(text));
    if (tags.empty()) return InvalidArgument("--tag needs key=value");
    filter.tags.insert(tags.begin(), tags.end());
  }
  return filter;
}

Status WriteOutput(const std::string& path, const std::string& text) {
  if (path.empty()) {
    std::cout << text;
    std::cout.flush();
    return std::cout ? Status::Ok() : Unavailable("cannot write to stdout");
  }
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      std::filesystem::remove(tmp);
      return Unavailable("cannot write " + path);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    return Unavailable("cannot write " + path + ": " + ec.message());
  }
  return Status::Ok();
}

namespace {

using Json = nlohmann::json;

Json WorkerJson(const ledger::WorkerRef& w) {
  return {{"id", w.id},
          {"name", w.name},
          {"role", w.role},
          {"capacity_class", std::string(ToString(w.capacity_class))},
          {"zone", w.zone},
          {"price_per_gpu_hour", w.price_per_gpu_hour},
          {"gpu_count", w.gpu_count}};
}

Json RowJson(const ledger::AttemptRow& r) {
  return {{"request_id", r.request_id},
          {"attempt", r.attempt},
          {"tenant", r.tenant},
          {"model", r.model},
          {"endpoint", r.endpoint},
          {"status", std::string(ledger::ToString(r.status))},
          {"finish_reason", r.finish_reason},
          {"arrival_unix", r.arrival_unix},
          {"first_token_unix", r.first_token_unix},
          {"end_unix", r.end_unix},
          {"queue_seconds", r.queue_seconds},
          {"prefill_seconds", r.prefill_seconds},
          {"transfer_seconds", r.transfer_seconds},
          {"decode_seconds", r.decode_seconds},
          {"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"cached_prompt_tokens", r.cached_prompt_tokens},
          {"placement", r.placement},
          {"placement_reason", r.placement_reason},
          {"admission", r.admission},
          {"predicted_queue_seconds", r.predicted_queue_seconds},
          {"predicted_ttft_seconds", r.predicted_ttft_seconds},
          {"prefill_worker", WorkerJson(r.prefill_worker)},
          {"decode_worker", WorkerJson(r.decode_worker)},
          {"prefill_step_seconds", r.prefill_step_seconds},
          {"decode_step_seconds", r.decode_step_seconds},
          {"kv_bytes", r.kv_bytes},
          {"egress_cost_usd", r.cost.egress_usd},
          {"cost_usd", r.cost.total()},
          {"tags", r.tags},
          {"user", r.user},
          {"prompt_text", r.prompt_text},
          {"completion_text", r.completion_text}};
}

std::string CsvValue(const Json& v) {
  if (v.is_string()) return ledger::CsvField(v.get<std::string>());
  if (v.is_object()) {  // tags
    std::string joined;
    for (const auto& [key, value] : v.items()) {
      joined += (joined.empty() ? "" : ",") + key + "=" + value.get<std::string>();
    }
    return ledger::CsvField(joined);
  }
  return DumpJson(v);
}

// The CSV columns are the JSON's, workers flattened (prefill_worker.id, ...) and tags as
// "k=v,k2=v2" (the x-pdserve-tags form).
std::string RowsCsv(const std::vector<ledger::AttemptRow>& rows) {
  std::string out;
  bool first_row = true;
  for (const auto& r : rows) {
    std::vector<std::pair<std::string, std::string>> cells;
    const Json row = RowJson(r);
    for (const auto& [key, value] : row.items()) {
      if (value.is_object() && key != "tags") {
        for (const auto& [sub, v] : value.items()) cells.emplace_back(key + "." + sub, CsvValue(v));
      } else {
        cells.emplace_back(key, CsvValue(value));
      }
    }
    if (first_row) {
      for (size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + cells[i].first;
      out += "\n";
      first_row = false;
    }
    for (size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + cells[i].second;
    out += "\n";
  }
  return out;
}

struct ExportOptions {
  std::string ledger, format = "csv", out;
  LedgerFilterFlags filter;
};

void Export(const ExportOptions& o) {
  auto filter = ParseLedgerFilterFlags(o.filter);
  if (!filter.ok()) Fail("ledger export", filter.status());
  auto ledger = ledger::Ledger::OpenReadOnly(o.ledger);
  if (!ledger.ok()) Fail("ledger export", ledger.status());
  auto rows = (*ledger)->Rows(*filter);
  if (!rows.ok()) Fail("ledger export", rows.status());
  std::string text;
  if (o.format == "json") {
    Json all = Json::array();
    for (const auto& r : *rows) all.push_back(RowJson(r));
    text = DumpJson(all, 2) + "\n";
  } else {
    text = rows->empty() ? std::string() : RowsCsv(*rows);
  }
  Status written = WriteOutput(o.out, text);
  if (!written.ok()) Fail("ledger export", written);
}

}  // namespace

void AddLedgerCommands(CLI::App& app) {
  CLI::App* group = app.add_subcommand("ledger", "Export or forget rows of a cost ledger");
  group->require_subcommand(1);

  auto ex = std::make_shared<ExportOptions>();
  CLI::App* export_cmd =
      group->add_subcommand("export", "Write ledger rows as CSV or JSON (filtered)");
  export_cmd
      ->add_option("--ledger", ex->ledger, "the ledger: an SQLite file or a postgresql:// URI")
      ->required();
  export_cmd->add_option("--format", ex->format, "csv or json")
      ->check(CLI::IsMember({"csv", "json"}));
  export_cmd->add_option("--out", ex->out, "write here instead of stdout");
  AddLedgerFilterFlags(*export_cmd, ex->filter);
  export_cmd->callback([ex] { Export(*ex); });

  auto forget_ledger = std::make_shared<std::string>();
  auto forget_tenant = std::make_shared<std::string>();
  CLI::App* forget = group->add_subcommand("forget", "Delete every row of a tenant");
  forget
      ->add_option("--ledger", *forget_ledger, "the ledger: an SQLite file or a postgresql:// URI")
      ->required();
  forget->add_option("--tenant", *forget_tenant, "the tenant whose rows go")->required();
  forget->callback([forget_ledger, forget_tenant] {
    // Never Open: it would make a missing file, an empty one or an empty database a ledger.
    auto ledger = ledger::Ledger::OpenExisting(*forget_ledger);
    if (!ledger.ok()) Fail("ledger forget", ledger.status());
    auto deleted = (*ledger)->ForgetTenant(*forget_tenant);
    if (!deleted.ok()) Fail("ledger forget", deleted.status());
    std::cout << "deleted " << *deleted << " rows of tenant " << *forget_tenant << "\n";
  });
}

}  // namespace pdserve::app
