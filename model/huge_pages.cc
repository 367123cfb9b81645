#include "model/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace pdserve::model {

std::shared_ptr<void> AllocateHugePageBuffer(size_t bytes) {
  constexpr size_t kHugePage = 2u << 20;
  const size_t rounded = (std::max<size_t>(bytes, 1) + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (!p) throw std::bad_alloc();
  // Advice only: without THP (or with it off) the memory is ordinary pages.
  ::madvise(p, rounded, MADV_HUGEPAGE);
  return std::shared_ptr<void>(p, std::free);
}

}  // namespace pdserve::model
