// Logging set-up for every pdserve process: spdlog to stderr with the process role in each line.
// Call InitLogging once from main() before any thread starts; after that, log with spdlog's
// free functions (spdlog::info, ...) from any thread.
#pragma once

#include <string>

namespace pdserve {

// level: trace, debug, info, warn, error or off. Unknown levels fall back to info.
void InitLogging(const std::string& role, const std::string& level);

}  // namespace pdserve
