// The cost report as one self-contained HTML page: inline CSS and SVG charts generated here (no
// scripts, no fonts or files from the network), so it opens in a browser offline. Charts: cost
// per 1M tokens by option (reserved, burst, blended, fully loaded, each API), utilisation over
// time, and where the money went (request cost, retry waste, idle waste); tables below them.
// Called by app/report_command.cc for --format html. Pure function: safe from any thread.
#pragma once

#include <string>

#include "ledger/cost_report.h"

namespace pdserve::ledger {

std::string CostReportHtml(const CostReport& report);

}  // namespace pdserve::ledger
