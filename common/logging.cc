#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace pdserve {

void InitLogging(const std::string& role, const std::string& level) {
  auto logger = spdlog::stderr_color_mt("pdserve");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [" + role + "] %v");
  spdlog::set_default_logger(logger);
  auto parsed = spdlog::level::from_str(level);
  spdlog::set_level(parsed == spdlog::level::off && level != "off" ? spdlog::level::info : parsed);
}

}  // namespace pdserve
