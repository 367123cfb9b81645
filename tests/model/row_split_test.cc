// RowSplit: with real threads, every row of every product is handed out exactly once, whatever
// the thread count, the streams and the step; with streams, every call gets `streams` pieces.
#include "model/row_split.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace pdserve::model {
namespace {

struct Case {
  std::vector<int> rows;
  int threads, streams, step;
};

void CheckEveryRowOnce(const Case& c) {
  SCOPED_TRACE(::testing::Message()
               << "threads " << c.threads << " streams " << c.streams << " step " << c.step);
  std::vector<std::vector<std::atomic<int>>> taken;
  for (int n : c.rows) taken.emplace_back(n);
  std::atomic<bool> wrong_count{false}, reversed{false};
  auto work = [&](RowSplit& split, int me) {
    split.Work(me, c.step, c.step, [&](size_t product, const Piece* pieces, int count) {
      if (count != c.streams) wrong_count = true;
      for (int i = 0; i < count; ++i) {
        if (pieces[i].n1 < pieces[i].n0) reversed = true;
        for (int r = pieces[i].n0; r < pieces[i].n1; ++r) taken[product][r].fetch_add(1);
      }
    });
  };
  // RowSplit keeps its ranges in the building thread's storage; the workers share it.
  RowSplit split(c.rows, c.threads, c.streams);
  std::vector<std::thread> threads;
  for (int me = 0; me < c.threads; ++me) threads.emplace_back([&, me] { work(split, me); });
  for (auto& t : threads) t.join();
  EXPECT_FALSE(wrong_count);
  EXPECT_FALSE(reversed);
  for (size_t p = 0; p < c.rows.size(); ++p) {
    for (int r = 0; r < c.rows[p]; ++r)
      ASSERT_EQ(taken[p][r].load(), 1) << "product " << p << " row " << r;
  }
}

TEST(RowSplit, EveryRowOfEveryProductGoesOutExactlyOnce) {
  const std::vector<int> rows = {1, 5, 24, 25, 256, 768, 1000, 32000};
  for (int threads : {1, 2, 3, 7}) {
    for (int streams : {1, 2, 4}) {
      for (int step : {16, 72}) CheckEveryRowOnce({rows, threads, streams, step});
    }
  }
}

TEST(RowSplit, AThreadThatNeverComesLeavesItsShareToTheOthers) {
  // OpenMP may give a region fewer threads than asked for: the missing thread's share is stolen.
  const std::vector<int> rows = {100, 5000};
  std::vector<std::vector<int>> taken = {std::vector<int>(100), std::vector<int>(5000)};
  RowSplit split(rows, 3, 2);
  for (int me : {0, 2}) {  // thread 1 never runs
    split.Work(me, 16, 16, [&](size_t product, const Piece* pieces, int count) {
      for (int i = 0; i < count; ++i)
        for (int r = pieces[i].n0; r < pieces[i].n1; ++r) ++taken[product][r];
    });
  }
  for (size_t p = 0; p < rows.size(); ++p)
    for (int r = 0; r < rows[p]; ++r) ASSERT_EQ(taken[p][r], 1) << "product " << p << " row " << r;
}

TEST(RowSplit, AThreadsOwnPiecesRunOnFromWhereTheLastOneEnded) {
  // One thread, two streams over 96 rows: sub-ranges [0, 48) and [48, 96), 16 rows at a time.
  const std::vector<int> rows = {96};
  RowSplit split(rows, 1, 2);
  std::vector<std::pair<Piece, Piece>> calls;
  split.Work(0, 16, 16, [&](size_t, const Piece* pieces, int count) {
    ASSERT_EQ(count, 2);
    calls.push_back({pieces[0], pieces[1]});
  });
  ASSERT_EQ(calls.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(calls[i].first.n0, 16 * i);
    EXPECT_EQ(calls[i].first.n1, 16 * i + 16);
    EXPECT_EQ(calls[i].second.n0, 48 + 16 * i);
    EXPECT_EQ(calls[i].second.n1, 48 + 16 * i + 16);
  }
}

}  // namespace
}  // namespace pdserve::model
