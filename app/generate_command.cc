#include "app/commands.h"

namespace pdserve::app {

void AddGenerateCommand(CLI::App& app) {}

}  // namespace pdserve::app
