// Step shares; see step_shares.h.
#include "router/step_shares.h"

#include <numeric>

namespace pdserve::router {

std::vector<double> StepShares(double seconds, std::span<const int32_t> tokens) {
  std::vector<double> shares(tokens.size(), 0.0);
  if (tokens.empty()) return shares;
  const int64_t total = std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
  for (size_t i = 0; i < tokens.size(); ++i) {
    shares[i] = total > 0 ? seconds * static_cast<double>(tokens[i]) / static_cast<double>(total)
                          : seconds / static_cast<double>(tokens.size());
  }
  return shares;
}

}  // namespace pdserve::router
