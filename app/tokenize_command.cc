#include "app/commands.h"

namespace pdserve::app {

void AddTokenizeCommand(CLI::App& app) {}

}  // namespace pdserve::app
