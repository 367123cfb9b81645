// The one way a pdserve subcommand fails (app/commands.h).
#include <iostream>

#include "app/commands.h"

namespace pdserve::app {

void Fail(const std::string& command, const Status& status) {
  std::cerr << "pdserve " << command << ": " << status.ToString() << "\n";
  throw CLI::RuntimeError(1);
}

void ExitOnError(const std::string& command, const Status& status) {
  if (!status.ok()) Fail(command, status);
}

}  // namespace pdserve::app
