// Coalescing a request's page mapping into runs: the unit of KV transfer is (layer, run of
// contiguous pages), where the source pages and the destination pages are both contiguous, so
// each run is one contiguous byte range in the sender's pool and in the receiver's pool.
// Pure functions: safe from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"

namespace pdserve::kv_transfer {

struct PageRun {
  int32_t src_first = 0;  // first page id in the sender's pool
  int32_t dst_first = 0;  // first page id in the receiver's pool
  int32_t count = 0;      // pages; src_first+i maps to dst_first+i

  bool operator==(const PageRun&) const = default;
};

// Pairs src_pages[i] with dst_pages[i] and merges neighbours where both ids step by one, keeping
// the block-table order. Refuses lists of different lengths and negative ids.
Result<std::vector<PageRun>> CoalesceRuns(std::span<const int32_t> src_pages,
                                          std::span<const int32_t> dst_pages);

// Cuts runs into chunks of at most max_pages. With lead_pages > 0 the chunks start smaller and
// grow: the first holds at most lead_pages, and each next one at most twice the previous, up to
// max_pages. A sender must checksum a chunk before its first byte leaves, so a small first chunk
// starts the wire sooner, and each later one is checksummed while the one before it is in flight.
std::vector<PageRun> SplitRuns(std::span<const PageRun> runs, int32_t max_pages,
                               int32_t lead_pages = 0);

}  // namespace pdserve::kv_transfer
