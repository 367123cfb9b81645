// The pdserve subcommands. Each Add*Command registers one subcommand (its flags and its action)
// on the parent CLI11 app; main.cc calls them all. An action fails in one way, Fail (or
// ExitOnError): the status on stderr, then CLI::RuntimeError with the exit code, so that main
// decides how the process ends.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "ledger/ledger.h"
#include "worker/gateway_link.h"

namespace pdserve::app {

// Prints "pdserve COMMAND: STATUS" on stderr and ends the action with exit code 1.
[[noreturn]] void Fail(const std::string& command, const Status& status);
// Fail when `status` is not OK.
void ExitOnError(const std::string& command, const Status& status);

void AddMakeModelCommand(CLI::App& app);
void AddGenerateCommand(CLI::App& app);
void AddTokenizeCommand(CLI::App& app);
// `pdserve template`: the prompt a model's chat template renders (app/template_command.cc).
void AddTemplateCommand(CLI::App& app);
// `pdserve gateway`, `pdserve decode`, `pdserve prefill` and `pdserve up` (app/serve_commands.cc).
void AddServeCommands(CLI::App& app);
// `pdserve gateway` (app/gateway_command.cc).
void AddGatewayCommand(CLI::App& app);
// `pdserve decode` (--role both: colocated) and `pdserve prefill` (app/worker_commands.cc).
void AddWorkerCommands(CLI::App& app);
// `pdserve up` (app/up_command.cc).
void AddUpCommand(CLI::App& app);
// The model directory a serving command was given, or the built-in tiny model (made if absent);
// Fail when it cannot be made (defined in app/serve_commands.cc).
std::string ModelOrBuiltin(const char* command, const std::string& dir);
// Splits --gateway host:port; Fail on anything else (app/serve_commands.cc).
// (host:port[,host:port...]: the gateways a worker registers with; fails the command otherwise.)
void ParseGatewayAddress(const char* command, const std::string& addresses,
                         worker::GatewayLinkOptions* gateway);
// "N" or "MIN:MAX" workers: how many numbers it held (0: neither form); *max = *min for "N"
// (app/serve_commands.cc).
int ScanWorkerRange(const std::string& text, int* min, int* max);
// `pdserve sim`: many simulated workers in one process (app/sim_command.cc).
void AddSimCommand(CLI::App& app);
// `pdserve profile calibrate`: a profile scaled to served steps (app/profile_command.cc).
void AddProfileCommands(CLI::App& app);
// `pdserve capacity`: a profile's predicted throughput for a workload (model/capacity_model.h).
void AddCapacityCommand(CLI::App& app);
// `pdserve bench ...`: the group and its members.
void AddBenchCommands(CLI::App& app);
void AddBenchEngineCommand(CLI::App& bench);
void AddBenchServeCommand(CLI::App& bench);
void AddBenchAcceptanceCommand(CLI::App& bench);
void AddBenchKvCommand(CLI::App& bench);
void AddBenchLedgerCommand(CLI::App& bench);
void AddBenchGrammarCommand(CLI::App& bench);
// `pdserve ledger export` and `pdserve ledger forget` (app/ledger_commands.cc).
void AddLedgerCommands(CLI::App& app);
// `pdserve report`: the cost report (app/report_command.cc).
void AddReportCommand(CLI::App& app);

// Flags that select ledger rows, shared by `pdserve report` and `pdserve ledger export`
// (defined in app/ledger_commands.cc).
struct LedgerFilterFlags {
  std::string tenant, from, to;   // empty: unset; times are unix seconds or ISO-8601 UTC
  std::vector<std::string> tags;  // "k=v" (or "k=v,k2=v2"), every one must match
};
void AddLedgerFilterFlags(CLI::App& cmd, LedgerFilterFlags& flags);
Result<ledger::LedgerFilter> ParseLedgerFilterFlags(const LedgerFilterFlags& flags);
// `--dtype auto|f32|bf16|f16`, the engine's matrix dtype (model::EngineOptions::dtype), for
// every command that loads an engine (defined in app/generate_command.cc).
void AddDtypeOption(CLI::App& cmd, std::string& dtype);
// `--prefix-cache on|off` (default on), the engine's prefix cache (model::EngineOptions::
// prefix_cache), for every command that runs workers (defined in app/worker_commands.cc).
void AddPrefixCacheOption(CLI::App& cmd, bool& prefix_cache);
// Writes `text` to stdout when `path` is empty, else to `path` through a temporary file renamed
// into place, so a failed run never leaves a partial file.
Status WriteOutput(const std::string& path, const std::string& text);

}  // namespace pdserve::app
