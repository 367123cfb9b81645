// The one percentile of pdserve: numpy's default ("linear") definition, as np.quantile(x, q)
// and np.percentile(x, 100 q) compute it. For the n values sorted ascending and q in [0, 1],
// h = (n - 1) q and the quantile is x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h]).
// q outside [0, 1] is clamped to it; a NaN q gives NaN. An empty list has quantile 0 (callers
// report empty latency lists and empty step logs as 0, as vLLM's benchmark reads an empty list as
// [0]). Used by the load generator's metrics, the benchmarks, the profile's fit and calibration and
// the gateway's cold-start estimate. Pure functions: safe from any thread.
#pragma once

#include <vector>

namespace pdserve {

// The quantile q of `values` (any order; a copy is sorted).
double Quantile(std::vector<double> values, double q);

// The quantile q of `sorted`, which must be ascending (not checked).
double QuantileOfSorted(const std::vector<double>& sorted, double q);

// Quantile(values, 0.5).
double Median(std::vector<double> values);

}  // namespace pdserve
