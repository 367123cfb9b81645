#include "model/cpu_matmul_shared.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace pdserve::model {
namespace {

TEST(PrefetchLinesTest, ARunIsOneLineAfterAnother) {
  std::vector<char> storage(64 * 16);
  const char* block = storage.data();
  const PrefetchLines run = PrefetchLines::Run(block + 64, 11);
  EXPECT_EQ(run.count, 11);
  for (int b = 0; b < run.count; ++b) EXPECT_EQ(run.Address(b), block + 64 * (b + 1)) << b;
  const PrefetchLines none = PrefetchLines::Run(nullptr, 0);
  for (int b = 0; b < 4; ++b) EXPECT_EQ(none.Address(b), nullptr);
}

// The lines ForEachPanel hands its calls, counted per line of the matrix. The matrix's memory
// is never read (only addresses are compared), but it is there: addresses past an object are
// not for computing.
struct Walk {
  std::map<const char*, int> sent;  // line -> times sent
  std::vector<int> panels;          // the n of each call, in order
  std::vector<int> groups;          // the group of each call
};

Walk WalkPanels(const Matrix& w, size_t row_bytes, int n0, int n1, int groups) {
  Walk walk;
  // kernel_lines past any call's count: every line goes through the calls.
  ForEachPanel<6>(w, row_bytes, n0, n1, groups, 1 << 20,
                  [&](int n, int rows, int g, const PrefetchLines& prefetch) {
                    EXPECT_TRUE(rows == 6 || rows == 1);
                    walk.panels.push_back(n);
                    walk.groups.push_back(g);
                    for (int b = 0; b < prefetch.count; ++b) {
                      if (const char* line = prefetch.Address(b)) ++walk.sent[line];
                    }
                  });
  return walk;
}

TEST(ForEachPanelTest, EveryPanelFourAheadOrMoreIsSentWholeAndOnce) {
  const size_t row_bytes = 768 * 4;  // K = 768 f32: 48 lines a row, 288 a panel
  std::vector<char> storage(120 * row_bytes);
  const Matrix w{storage.data(), DType::kF32, 120, 768};
  const auto* base = static_cast<const char*>(w.data);
  const Walk walk = WalkPanels(w, row_bytes, 0, 60, 4);
  // Panels in order, each with every group in turn.
  ASSERT_EQ(walk.panels.size(), 10u * 4);
  for (size_t i = 0; i < walk.panels.size(); ++i) {
    EXPECT_EQ(walk.panels[i], static_cast<int>(i / 4) * 6);
    EXPECT_EQ(walk.groups[i], static_cast<int>(i % 4));
  }
  for (const auto& [line, times] : walk.sent) EXPECT_EQ(times, 1) << "line sent twice";
  auto lines_sent = [&](int panel) {
    int count = 0;
    for (int l = 0; l < 288; ++l) count += walk.sent.count(base + (panel * 6 * row_bytes) + l * 64);
    return count;
  };
  // Panel p (rows 6p..6p+5) gets its quarter 3, 2, 1, 0 from the walk's panels p-1 .. p-4: the
  // first panels only in part, panels 4 to 10 (past the range: a thread's next piece) whole.
  EXPECT_EQ(lines_sent(0), 0);
  EXPECT_EQ(lines_sent(1), 72);
  EXPECT_EQ(lines_sent(2), 144);
  EXPECT_EQ(lines_sent(3), 216);
  for (int p = 4; p <= 10; ++p) EXPECT_EQ(lines_sent(p), 288) << "panel " << p;
  // The range ends at panel 9, whose walk sends quarters of panels 10 to 13.
  EXPECT_EQ(lines_sent(11), 216);
  EXPECT_EQ(lines_sent(12), 144);
  EXPECT_EQ(lines_sent(13), 72);
  EXPECT_EQ(lines_sent(14), 0);
}

TEST(ForEachPanelTest, NothingPastTheMatrixAndLastRowsOneAtATime) {
  const size_t row_bytes = 2048 * 2;  // K = 2048 bf16: 384 lines a panel
  std::vector<char> storage(27 * row_bytes);
  const Matrix w{storage.data(), DType::kBF16, 27, 2048};
  const auto* end = static_cast<const char*>(w.data) + 27 * row_bytes;
  const Walk walk = WalkPanels(w, row_bytes, 0, 27, 3);
  // 4 panels of 6 rows, then 3 single rows; 3 groups each.
  ASSERT_EQ(walk.panels.size(), 7u * 3);
  EXPECT_EQ(walk.panels.back(), 26);
  for (const auto& [line, times] : walk.sent) {
    EXPECT_LT(line, end) << "a line past the matrix";
    EXPECT_EQ(times, 1);
  }
}

}  // namespace
}  // namespace pdserve::model
