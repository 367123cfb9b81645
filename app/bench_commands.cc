#include "app/commands.h"

namespace pdserve::app {

void AddBenchCommands(CLI::App& app) {
  CLI::App* bench = app.add_subcommand(
      "bench",
      "Benchmarks: engine speed, KV bandwidth, serving load, ledger writes, response formats");
  bench->require_subcommand(1);
  AddBenchEngineCommand(*bench);
  AddBenchServeCommand(*bench);
  AddBenchAcceptanceCommand(*bench);
  AddBenchKvCommand(*bench);
  AddBenchLedgerCommand(*bench);
  AddBenchGrammarCommand(*bench);
}

}  // namespace pdserve::app
