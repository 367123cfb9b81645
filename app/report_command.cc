// `pdserve report`: reads a ledger and, where given, a price sheet, and writes the cost report
// (table, CSV, JSON or HTML; ledger/cost_report.h has the definitions): the self-hosted costs
// alone without a sheet, compared with the sheet's APIs with one. Every input is checked before
// anything is written, so a bad price sheet or ledger leaves no --out file behind.
#include <iostream>
#include <memory>

#include "app/commands.h"
#include "common/json_text.h"
#include "ledger/cost_report.h"
#include "ledger/cost_report_html.h"
#include "ledger/price_sheet.h"

namespace pdserve::app {
namespace {

struct ReportFlags {
  std::string ledger, prices, format = "table", out, group_by_tag;
  std::vector<std::string> apis;
  LedgerFilterFlags filter;
  int buckets = 24;
};

Result<std::string> RenderReport(const ReportFlags& f) {
  PDSERVE_ASSIGN_OR_RETURN(ledger::LedgerFilter filter, ParseLedgerFilterFlags(f.filter));
  std::vector<ledger::ApiPrice> apis;
  if (!f.prices.empty()) {
    PDSERVE_ASSIGN_OR_RETURN(ledger::PriceSheet sheet, ledger::PriceSheet::Load(f.prices));
    PDSERVE_ASSIGN_OR_RETURN(apis, sheet.Select(f.apis));
  } else if (!f.apis.empty()) {
    return InvalidArgument(
        "--api compares with a price sheet's entry: give the sheet with "
        "--prices (prices/litellm-sample.json is a sample)");
  }
  PDSERVE_ASSIGN_OR_RETURN(auto ledger, ledger::Ledger::OpenReadOnly(f.ledger));
  // The fleet's figures need every row in the window; tenant and tags narrow the sections.
  ledger::LedgerFilter window;
  window.from_unix = filter.from_unix;
  window.to_unix = filter.to_unix;
  PDSERVE_ASSIGN_OR_RETURN(auto rows, ledger->Rows(window));
  PDSERVE_ASSIGN_OR_RETURN(auto periods, ledger->Periods(filter.from_unix, filter.to_unix));

  ledger::ReportOptions options;
  options.from_unix = filter.from_unix;
  options.to_unix = filter.to_unix;
  options.tenant = filter.tenant;
  options.tags = filter.tags;
  if (!f.group_by_tag.empty()) options.group_by_tag = f.group_by_tag;
  options.utilisation_buckets = f.buckets;
  const ledger::CostReport report = ledger::BuildCostReport(rows, periods, apis, options);
  if (f.format == "json") return DumpJson(ledger::CostReportJson(report), 2) + "\n";
  if (f.format == "csv") return ledger::CostReportCsv(report);
  if (f.format == "html") return ledger::CostReportHtml(report);
  return ledger::CostReportTable(report);
}

}  // namespace

void AddReportCommand(CLI::App& app) {
  auto f = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Cost report from a ledger: reserved vs burst vs external APIs per 1M tokens");
  cmd->add_option("--ledger", f->ledger,
                  "the ledger the gateway wrote: an SQLite file or a postgresql:// URI")
      ->required();
  cmd->add_option("--prices", f->prices,
                  "price sheet in LiteLLM's model_prices_and_context_window.json format, to "
                  "compare with external APIs (prices/litellm-sample.json is a dated sample); "
                  "without it, self-hosted costs only");
  cmd->add_option("--api", f->apis,
                  "compare with this entry of the price sheet (repeatable; default: all)");
  cmd->add_option("--format", f->format, "table, csv, json or html")
      ->check(CLI::IsMember({"table", "csv", "json", "html"}));
  cmd->add_option("--out", f->out, "write here instead of stdout");
  cmd->add_option("--group-by-tag", f->group_by_tag, "also a section per value of this tag");
  cmd->add_option("--buckets", f->buckets, "points of the utilisation-over-time series")
      ->check(CLI::Range(1, 10000));
  AddLedgerFilterFlags(*cmd, f->filter);
  cmd->callback([f] {
    auto text = RenderReport(*f);
    ExitOnError("report", text.ok() ? WriteOutput(f->out, *text) : text.status());
  });
}

}  // namespace pdserve::app
