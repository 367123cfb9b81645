// When each request of a benchmark is sent: vLLM's arrival process. Gaps between requests are
// drawn from a gamma distribution with shape = burstiness and scale = 1 / (rate * burstiness), so
// the mean gap is 1 / rate whatever the burstiness and the coefficient of variation of the gaps
// is 1 / sqrt(burstiness): burstiness 1 is a Poisson process, below 1 burstier, above 1 steadier.
// An infinite rate sends everything at time 0. Pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace pdserve::bench {

struct ArrivalOptions {
  double request_rate = 0;  // requests per second; +inf sends all at once. Must be > 0.
  double burstiness = 1.0;  // gamma shape; must be > 0
  uint64_t seed = 0;        // same seed, same schedule (with the same standard library)
};

// Send offsets in seconds from the benchmark's start, non-decreasing, the first at 0 (vLLM sends
// the first request at once and sleeps after each).
Result<std::vector<double>> ArrivalOffsets(int64_t count, const ArrivalOptions& options);

}  // namespace pdserve::bench
