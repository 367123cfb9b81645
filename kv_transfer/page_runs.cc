#include "kv_transfer/page_runs.h"

#include <algorithm>
#include <string>

namespace pdserve::kv_transfer {

Result<std::vector<PageRun>> CoalesceRuns(std::span<const int32_t> src_pages,
                                          std::span<const int32_t> dst_pages) {
  if (src_pages.size() != dst_pages.size()) {
    return InvalidArgument("page mapping: " + std::to_string(src_pages.size()) +
                           " source pages but " + std::to_string(dst_pages.size()) +
                           " destination pages");
  }
  std::vector<PageRun> runs;
  for (size_t i = 0; i < src_pages.size(); ++i) {
    const int32_t s = src_pages[i], d = dst_pages[i];
    if (s < 0 || d < 0) return InvalidArgument("page mapping: negative page id");
    if (!runs.empty()) {
      PageRun& last = runs.back();
      if (s == last.src_first + last.count && d == last.dst_first + last.count) {
        ++last.count;
        continue;
      }
    }
    runs.push_back({s, d, 1});
  }
  return runs;
}

std::vector<PageRun> SplitRuns(std::span<const PageRun> runs, int32_t max_pages,
                               int32_t lead_pages) {
  max_pages = std::max<int32_t>(max_pages, 1);
  int32_t cap = lead_pages > 0 ? std::min(lead_pages, max_pages) : max_pages;
  std::vector<PageRun> out;
  for (const PageRun& r : runs) {
    for (int32_t off = 0; off < r.count;) {
      const int32_t n = std::min(cap, r.count - off);
      out.push_back({r.src_first + off, r.dst_first + off, n});
      off += n;
      cap = static_cast<int32_t>(std::min<int64_t>(int64_t{cap} * 2, max_pages));
    }
  }
  return out;
}

}  // namespace pdserve::kv_transfer
