#include "app/commands.h"

namespace pdserve::app {

void AddBenchEngineCommand(CLI::App& bench) {}

}  // namespace pdserve::app
