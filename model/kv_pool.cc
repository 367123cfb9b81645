#include "model/kv_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace pdserve::model {

KvPagePool::KvPagePool(int num_pages) : num_pages_(num_pages), in_use_(num_pages, 0) {
  free_list_.reserve(num_pages);
  for (int i = num_pages - 1; i >= 0; --i) free_list_.push_back(i);
}

Result<std::vector<int32_t>> KvPagePool::Allocate(int n) {
  if (n < 0) return InvalidArgument("cannot allocate a negative number of pages");
  std::lock_guard lock(mu_);
  if (static_cast<size_t>(n) > free_list_.size()) {
    return ResourceExhausted("need " + std::to_string(n) + " KV pages, " +
                             std::to_string(free_list_.size()) + " of " +
                             std::to_string(num_pages_) + " free");
  }
  // Taken from the top of the stack (recently freed, likely still in cache), in ascending order:
  // a fresh pool hands out 0, 1, 2, ... and a freed request's pages come back as they went, so a
  // request's pages form runs that KV transfer moves as one chunk instead of page by page.
  std::vector<int32_t> pages(free_list_.rbegin(), free_list_.rbegin() + n);
  free_list_.resize(free_list_.size() - n);
  if (!std::is_sorted(pages.begin(), pages.end())) std::sort(pages.begin(), pages.end());
  for (int32_t p : pages) in_use_[p] = 1;
  used_.fetch_add(n, std::memory_order_relaxed);
  return pages;
}

Status KvPagePool::EnsureCapacity(std::vector<int32_t>& table, int tokens, int page_size) {
  const int need = PagesForTokens(tokens, page_size) - static_cast<int>(table.size());
  if (need <= 0) return Status::Ok();
  PDSERVE_ASSIGN_OR_RETURN(auto pages, Allocate(need));
  table.insert(table.end(), pages.begin(), pages.end());
  return Status::Ok();
}

void KvPagePool::Free(std::span<const int32_t> pages) {
  std::lock_guard lock(mu_);
  // Pushed last page first, so the stack's top reads the pages in their original order.
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) {
    const int32_t p = *it;
    if (p < 0 || p >= num_pages_ || !in_use_[p]) {
      spdlog::error("KvPagePool: refusing to free page {} (not allocated)", p);
      continue;
    }
    in_use_[p] = 0;
    free_list_.push_back(p);
    used_.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace pdserve::model
