// The paged KV cache's bookkeeping. KvCacheShape says how the pool's memory is laid out (see
// docs/architecture.md, "KV layout"): per layer [num_pages][2][page_size][n_kv_heads][head_dim], so
// one layer's K and V for one page are contiguous. KvPagePool hands out and takes back page ids;
// the memory itself belongs to the Backend (host memory on CPU, device memory on a GPU).
// KvPagePool is thread-safe: a decode worker reserves pages from its network thread while the
// engine thread frees them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "common/status.h"
#include "model/dtype.h"

namespace pdserve::model {

struct KvCacheShape {
  int n_layers = 0;
  int num_pages = 0;
  int page_size = 16;  // tokens per page
  int n_kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::kF32;

  int kv_dim() const { return n_kv_heads * head_dim; }
  // Elements of one page of one layer: K and V, page_size tokens each.
  size_t page_elems() const { return 2ull * page_size * kv_dim(); }
  size_t page_bytes() const { return page_elems() * DTypeSize(dtype); }
  size_t layer_elems() const { return page_elems() * num_pages; }
  size_t layer_bytes() const { return layer_elems() * DTypeSize(dtype); }
  // Offset, in elements within a layer, of the K (kv=0) or V (kv=1) row of token `slot` of `page`.
  size_t Offset(int page, int kv, int slot) const {
    return (static_cast<size_t>(page) * 2 + kv) * page_size * kv_dim() +
           static_cast<size_t>(slot) * kv_dim();
  }
};

inline int PagesForTokens(int tokens, int page_size) {
  return (tokens + page_size - 1) / page_size;
}

class KvPagePool {
 public:
  explicit KvPagePool(int num_pages);

  // All n pages or none: ResourceExhausted when fewer are free.
  Result<std::vector<int32_t>> Allocate(int n);
  // Appends pages to `table` until it covers `tokens` tokens; all or none.
  Status EnsureCapacity(std::vector<int32_t>& table, int tokens, int page_size);
  // Returns pages to the pool. Freeing a page twice or an unknown id is a broken invariant and
  // is refused (logged), never corrupts the free list.
  void Free(std::span<const int32_t> pages);

  int num_pages() const { return num_pages_; }
  int used_pages() const { return used_.load(std::memory_order_relaxed); }
  int free_pages() const { return num_pages_ - used_pages(); }

 private:
  const int num_pages_;
  std::mutex mu_;
  std::vector<int32_t> free_list_;  // guarded by mu_; a stack, so recently freed pages are reused
  std::vector<uint8_t> in_use_;     // guarded by mu_
  std::atomic<int> used_{0};
};

}  // namespace pdserve::model
