#include "model/row_split.h"

#include <vector>

namespace pdserve::model {
namespace {

int RoundUp(int rows) { return (rows + kRowUnit - 1) / kRowUnit * kRowUnit; }

}  // namespace

RowSplit::RowSplit(std::span<const int> rows, int threads, int streams)
    : products_(rows.size()), threads_(threads), streams_(streams) {
  thread_local std::vector<RowRange> storage;
  const size_t count = products_ * threads_ * streams_;
  if (storage.size() < count) storage = std::vector<RowRange>(count);
  ranges_ = storage.data();
  for (size_t i = 0; i < products_; ++i) {
    const int share = RoundUp((rows[i] + threads_ - 1) / threads_);  // shares cover every row
    const int sub = RoundUp((share + streams_ - 1) / streams_);
    for (int th = 0; th < threads_; ++th) {
      const int end = std::min(rows[i], (th + 1) * share);
      for (int st = 0; st < streams_; ++st) {
        const int begin = std::min(end, th * share + st * sub);
        Range(i, th, st).Reset(begin, std::min(end, begin + sub));
      }
    }
  }
}

}  // namespace pdserve::model
