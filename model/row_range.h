// A range of W rows that one thread works through from the front while idle threads take the
// back half of what is left: the CPU matrix products' load balance (cpu_matmul.cc). Its owner's
// pieces are contiguous, so decode's weight stream keeps the hardware prefetchers running from
// one piece to the next; a thread that finishes early still takes over the rest of a slow
// thread's share instead of waiting for it.
// Thread-safe: any thread may call TakeFront and StealBack at the same time; every row is handed
// out exactly once. Reset is not concurrent with the others.
#pragma once

#include <atomic>
#include <cstdint>

namespace pdserve::model {

class alignas(64) RowRange {
 public:
  void Reset(int begin, int end);

  // Up to `rows` rows from the front into [*n0, *n1). False when none is left.
  bool TakeFront(int rows, int* n0, int* n1) { return TakeFront(rows, rows, n0, n1); }

  // The same, but no more than half of what is left (in whole multiples of `min_rows`) while
  // that is at least `min_rows`: pieces shrink toward the end, so the last piece another thread
  // may wait for is small.
  bool TakeFront(int rows, int min_rows, int* n0, int* n1);

  // The back half of what is left, with its start `unit` rows apart from the front (so the
  // owner's pieces and the stolen one keep whole multiples of `unit`); all of it when no more
  // than `unit` rows are left. False when none is left.
  bool StealBack(int unit, int* n0, int* n1);

 private:
  static uint64_t Pack(uint32_t front, uint32_t back) { return uint64_t{back} << 32 | front; }

  std::atomic<uint64_t> bounds_{0};  // front in the low 32 bits, back (one past) in the high 32
};

}  // namespace pdserve::model
