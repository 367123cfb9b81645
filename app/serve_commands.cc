// The serving processes' subcommands (`pdserve gateway`, `decode`, `prefill` and `up`) and what
// they share: the model a command serves, the gateway address a worker dials, a count of workers.
#include <cstdio>
#include <cstdlib>

#include "app/commands.h"
#include "model/model_maker.h"

namespace pdserve::app {

std::string ModelOrBuiltin(const char* command, const std::string& dir) {
  if (!dir.empty()) return dir;
  auto builtin = model::EnsureBuiltinModel();
  if (!builtin.ok()) Fail(command, builtin.status());
  return *builtin;
}

void ParseGatewayAddress(const char* command, const std::string& addresses,
                         worker::GatewayLinkOptions* gateway) {
  gateway->more_gateways.clear();
  size_t start = 0;
  for (int i = 0; start <= addresses.size(); ++i) {
    size_t end = addresses.find(',', start);
    if (end == std::string::npos) end = addresses.size();
    const std::string address = addresses.substr(start, end - start);
    start = end + 1;
    const auto colon = address.rfind(':');
    const int p = colon == std::string::npos ? 0 : std::atoi(address.c_str() + colon + 1);
    if (p <= 0 || p > 65535 || colon == 0) {
      Fail(command,
           InvalidArgument("--gateway must be host:port[,host:port...], got '" + address + "'"));
    }
    if (i == 0) {
      gateway->host = address.substr(0, colon);
      gateway->port = static_cast<uint16_t>(p);
    } else {
      gateway->more_gateways.push_back({address.substr(0, colon), static_cast<uint16_t>(p)});
    }
  }
}

int ScanWorkerRange(const std::string& text, int* min, int* max) {
  char tail = 0;
  const int n = std::sscanf(text.c_str(), "%d:%d%c", min, max, &tail);
  if (n == 1) *max = *min;
  return n == 1 || n == 2 ? n : 0;
}

void AddServeCommands(CLI::App& app) {
  AddGatewayCommand(app);
  AddWorkerCommands(app);
  AddUpCommand(app);
}

}  // namespace pdserve::app
