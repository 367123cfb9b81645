#include "app/commands.h"

namespace pdserve::app {

void AddMakeModelCommand(CLI::App& app) {}

}  // namespace pdserve::app
