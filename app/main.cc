// pdserve: one binary, one subcommand per process role or tool. See docs/architecture.md.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "app/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"pdserve: disaggregated LLM serving with per-request cost accounting"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pdserve " PDSERVE_VERSION);
  pdserve::app::AddMakeModelCommand(app);
  pdserve::app::AddGenerateCommand(app);
  pdserve::app::AddTokenizeCommand(app);
  pdserve::app::AddTemplateCommand(app);
  pdserve::app::AddServeCommands(app);
  pdserve::app::AddSimCommand(app);
  pdserve::app::AddCapacityCommand(app);
  pdserve::app::AddProfileCommands(app);
  pdserve::app::AddBenchCommands(app);
  pdserve::app::AddReportCommand(app);
  pdserve::app::AddLedgerCommands(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
