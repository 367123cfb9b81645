// The pdserve subcommands. Each Add*Command registers one subcommand (its flags and its action)
// on the parent CLI11 app; main.cc calls them all. Actions return through CLI::RuntimeError with
// the process exit code, so main decides how the process ends.
#pragma once

#include <CLI/CLI.hpp>

namespace pdserve::app {

void AddMakeModelCommand(CLI::App& app);
void AddGenerateCommand(CLI::App& app);
void AddTokenizeCommand(CLI::App& app);
// `pdserve gateway`, `pdserve decode` and `pdserve up`.
void AddServeCommands(CLI::App& app);
// `pdserve bench ...`: the group and its members.
void AddBenchCommands(CLI::App& app);
void AddBenchEngineCommand(CLI::App& bench);
void AddBenchServeCommand(CLI::App& bench);
void AddBenchAcceptanceCommand(CLI::App& bench);
void AddBenchKvCommand(CLI::App& bench);

}  // namespace pdserve::app
