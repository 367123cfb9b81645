// How the CPU matrix products (cpu_matmul.cc) hand out a call's W rows to their OpenMP threads.
// Each product's rows start split evenly between the threads, and each thread's share into
// `streams` sub-ranges, one RowRange each. A thread works through its own sub-ranges, taking a
// piece from the front of every one of them at a time (contiguous, so each weight stream runs on
// from piece to piece), then takes the back half of whatever is left in the others' sub-ranges,
// so a thread that finishes early takes over the rest of a slow one's share.
// Shares and sub-ranges start at multiples of kRowUnit rows (every micro-kernel shape divides 24).
// Build one per call on the calling thread; then every thread of the parallel region calls Work.
// Every row of every product is handed out exactly once.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

#include "model/row_range.h"

namespace pdserve::model {

constexpr int kRowUnit = 24;
constexpr int kMaxStreams = 4;  // sub-ranges a thread, at most

// Rows [n0, n1) of one product.
struct Piece {
  int n0, n1;
};

class RowSplit {
 public:
  // `rows[i]`: product i's row count. 1 <= streams <= kMaxStreams. Uses thread-local storage of
  // the calling thread, reused from call to call (decode runs ~60 products a step).
  RowSplit(std::span<const int> rows, int threads, int streams);

  // Called by every thread `me` of the parallel region: run(product, pieces, count) for each
  // piece of work it gets: `streams` pieces (some may be empty) of at most `step` rows from the
  // fronts of its own sub-ranges (down to `min_step` near their ends, RowRange::TakeFront), then
  // pieces stolen from the others' (halved into `streams`).
  template <typename Run>
  void Work(int me, int step, int min_step, const Run& run) {
    Piece pieces[kMaxStreams];
    int n0, n1;
    for (size_t i = 0; i < products_; ++i) {
      while (true) {
        int count = 0;
        for (int st = 0; st < streams_; ++st) {
          if (Range(i, me, st).TakeFront(step, min_step, &n0, &n1)) pieces[count++] = {n0, n1};
        }
        if (count == 0) break;
        Deliver(i, pieces, count, run);
      }
    }
    for (int v = 1; v < threads_; ++v) {
      for (size_t i = 0; i < products_; ++i) {
        for (int st = 0; st < streams_; ++st) {
          RowRange& other = Range(i, (me + v) % threads_, st);
          while (other.StealBack(kRowUnit, &n0, &n1)) {
            pieces[0] = {n0, n1};
            Deliver(i, pieces, 1, run);
          }
        }
      }
    }
  }

 private:
  // With streams, always `streams_` pieces: a stolen piece, or the last of a thread's own, is
  // halved (the largest first) until there are enough.
  template <typename Run>
  void Deliver(size_t product, Piece* pieces, int count, const Run& run) {
    while (count < streams_) {
      Piece* largest = std::max_element(pieces, pieces + count,
                                        [](Piece a, Piece b) { return a.n1 - a.n0 < b.n1 - b.n0; });
      const int mid = largest->n0 + (largest->n1 - largest->n0) / 2;
      pieces[count++] = {mid, largest->n1};
      largest->n1 = mid;
    }
    run(product, pieces, count);
  }

  RowRange& Range(size_t product, int thread, int stream) {
    return ranges_[(product * threads_ + thread) * streams_ + stream];
  }

  size_t products_;
  int threads_, streams_;
  RowRange* ranges_;
};

}  // namespace pdserve::model
