#include "common/percentile.h"

#include <algorithm>
#include <cmath>

namespace pdserve {

double QuantileOfSorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  if (std::isnan(q)) return q;
  const double h = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double Quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return QuantileOfSorted(values, q);
}

double Median(std::vector<double> values) { return Quantile(std::move(values), 0.5); }

}  // namespace pdserve
