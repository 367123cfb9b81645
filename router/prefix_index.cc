#include "router/prefix_index.h"

#include <algorithm>

namespace pdserve::router {

std::vector<int> MatchedBlocks(std::span<const PrefixIndex* const> indexes,
                               std::span<const BlockKey> prompt,
                               std::span<const uint64_t> workers) {
  std::vector<int> best(workers.size(), 0);
  for (const PrefixIndex* index : indexes) {
    const std::vector<int> matched = index->MatchedBlocks(prompt, workers);
    for (size_t j = 0; j < best.size(); ++j) best[j] = std::max(best[j], matched[j]);
  }
  return best;
}

}  // namespace pdserve::router
