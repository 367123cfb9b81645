#include "model/row_range.h"

#include <algorithm>

namespace pdserve::model {

void RowRange::Reset(int begin, int end) {
  bounds_.store(Pack(begin, std::max(begin, end)), std::memory_order_relaxed);
}

bool RowRange::TakeFront(int rows, int min_rows, int* n0, int* n1) {
  uint64_t b = bounds_.load(std::memory_order_relaxed);
  while (true) {
    const uint32_t front = static_cast<uint32_t>(b), back = static_cast<uint32_t>(b >> 32);
    if (front >= back) return false;
    const uint32_t left = back - front;
    const uint32_t m = std::max(1, min_rows);
    const uint32_t half = std::max<uint32_t>(m, left / 2 / m * m);
    const uint32_t end = front + std::max<uint32_t>(1, std::min({left, half, uint32_t(rows)}));
    if (bounds_.compare_exchange_weak(b, Pack(end, back), std::memory_order_relaxed)) {
      *n0 = static_cast<int>(front);
      *n1 = static_cast<int>(end);
      return true;
    }
  }
}

bool RowRange::StealBack(int unit, int* n0, int* n1) {
  uint64_t b = bounds_.load(std::memory_order_relaxed);
  while (true) {
    const uint32_t front = static_cast<uint32_t>(b), back = static_cast<uint32_t>(b >> 32);
    if (front >= back) return false;
    const uint32_t left = back - front, u = static_cast<uint32_t>(unit);
    // The owner keeps the front half, rounded up to whole units.
    const uint32_t start = left <= u ? front : front + (left / 2 + u - 1) / u * u;
    if (bounds_.compare_exchange_weak(b, Pack(front, start), std::memory_order_relaxed)) {
      *n0 = static_cast<int>(start);
      *n1 = static_cast<int>(back);
      return true;
    }
  }
}

}  // namespace pdserve::model
