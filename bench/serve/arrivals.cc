#include "bench/serve/arrivals.h"

#include <cmath>
#include <random>

#include <fmt/format.h>

namespace pdserve::bench {

Result<std::vector<double>> ArrivalOffsets(int64_t count, const ArrivalOptions& options) {
  if (count < 0) return InvalidArgument("request count is negative");
  if (!(options.request_rate > 0)) {
    return InvalidArgument(
        fmt::format("request rate {} must be > 0 (inf for all at once)", options.request_rate));
  }
  if (!(options.burstiness > 0) || !std::isfinite(options.burstiness)) {
    return InvalidArgument(fmt::format("burstiness {} must be > 0", options.burstiness));
  }
  std::vector<double> offsets(static_cast<size_t>(count), 0.0);
  if (std::isinf(options.request_rate)) return offsets;
  std::mt19937_64 rng(options.seed);
  double theta = 1.0 / (options.request_rate * options.burstiness);
  std::gamma_distribution<double> gap(options.burstiness, theta);
  double t = 0;
  for (int64_t i = 1; i < count; ++i) {
    t += gap(rng);
    offsets[static_cast<size_t>(i)] = t;
  }
  return offsets;
}

}  // namespace pdserve::bench
