// A worker's registered name and its parts; see worker_name.h.
#include "common/worker_name.h"

#include <charconv>

namespace pdserve {

std::string WorkerName(std::string_view host, int64_t pid, std::string_view slurm_job) {
  std::string name = std::string(host) + ":" + std::to_string(pid);
  if (!slurm_job.empty()) name += "@slurm:" + std::string(slurm_job);
  return name;
}

std::optional<WorkerNameParts> ParseWorkerName(std::string_view name) {
  WorkerNameParts parts;
  constexpr std::string_view kSlurm = "@slurm:";
  if (const size_t at = name.find(kSlurm); at != std::string_view::npos) {
    parts.slurm_job = std::string(name.substr(at + kSlurm.size()));
    if (parts.slurm_job.empty()) return std::nullopt;
    name = name.substr(0, at);
  }
  const size_t colon = name.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  const std::string_view pid = name.substr(colon + 1);
  const auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), parts.pid);
  if (ec != std::errc() || end != pid.data() + pid.size() || parts.pid <= 0) return std::nullopt;
  parts.host = std::string(name.substr(0, colon));
  return parts;
}

}  // namespace pdserve
