// The CUDA backend's step planner (model/cuda/step_plan.h): rows, tables and logit rows follow
// the chunks; attention items cover every visible key once and fit the kernel; decode rows split
// finer than prompt tiles; a batch the CPU backend refuses is refused. Plain C++: no GPU needed.
#include "model/cuda/step_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/model/random_model.h"

namespace pdserve::model {
namespace {

using testing::Iota;
using testing::RandomTokens;
using testing::SmallConfig;

TEST(CudaStepPlanTest, RowsTablesAndLogitRowsFollowTheChunks) {
  ModelConfig c = SmallConfig();
  KvCacheShape shape{c.n_layers, 32, 4, c.n_kv_heads, c.head_dim, DType::kBF16};
  const std::vector<int32_t> a = {1, 2, 3, 4, 5}, b = {6};
  const std::vector<int32_t> pages_a = {7, 3, 9}, pages_b = {1, 2, 0, 5};
  ForwardBatch batch;
  batch.chunks.push_back({b, 10, pages_b, true});  // decode at position 10: pages 0..2
  batch.chunks.push_back({a, 2, pages_a, false});  // prompt chunk at 2..6: pages 0..1
  cuda::StepPlan plan;
  ASSERT_TRUE(cuda::BuildStepPlan(batch, c, shape, {}, &plan).ok());
  EXPECT_EQ(plan.num_rows, 6);
  EXPECT_EQ(plan.tokens, (std::vector<int32_t>{6, 1, 2, 3, 4, 5}));
  EXPECT_EQ(plan.positions, (std::vector<int32_t>{10, 2, 3, 4, 5, 6}));
  EXPECT_EQ(plan.tables, (std::vector<int32_t>{1, 2, 0, 7, 3}));
  EXPECT_EQ(plan.row_table, (std::vector<int32_t>{0, 3, 3, 3, 3, 3}));
  EXPECT_EQ(plan.logit_rows, (std::vector<int32_t>{0}));
  batch.all_logits = true;
  ASSERT_TRUE(cuda::BuildStepPlan(batch, c, shape, {}, &plan).ok());
  EXPECT_EQ(plan.logit_rows, Iota(6));
}

// Every (row, head tile, key it may see) is covered by exactly one item, each item fits the
// kernel's rows, and split tiles have consecutive partial slots listed in `combine`.
void ExpectPlanCovers(const ModelConfig& c, const ForwardBatch& batch, int target_blocks) {
  KvCacheShape shape{c.n_layers, 512, 16, c.n_kv_heads, c.head_dim, DType::kBF16};
  cuda::StepPlan plan;
  cuda::StepPlanOptions options;
  options.target_blocks = target_blocks;
  ASSERT_TRUE(cuda::BuildStepPlan(batch, c, shape, options, &plan).ok());
  const cuda::HeadTiling tiling = cuda::TileHeads(c);
  EXPECT_LE(tiling.heads_per_tile * tiling.tokens_per_tile, tiling.max_rows);
  EXPECT_EQ(tiling.heads_per_tile * tiling.head_tiles >= c.n_heads / c.n_kv_heads, true);
  std::vector<int> seen(plan.num_rows, 0);
  std::set<int> partials;
  int max_item_tokens = 0;
  for (const auto& item : plan.items) {
    max_item_tokens = std::max(max_item_tokens, item.n_rows);
    ASSERT_GE(item.n_rows, 1);
    ASSERT_LE(item.n_rows, tiling.tokens_per_tile);
    ASSERT_LT(item.key_begin, item.key_end);
    EXPECT_EQ(item.pos0, plan.positions[item.row0]);
    EXPECT_EQ(item.table, plan.row_table[item.row0]);
    for (int r = item.row0; r < item.row0 + item.n_rows; ++r) {
      EXPECT_EQ(plan.positions[r], item.pos0 + (r - item.row0));  // consecutive positions
      EXPECT_EQ(plan.row_table[r], item.table);                   // one sequence
      // Keys this row sees in this item, counted toward 0..pos exactly once.
      seen[r] += std::max(0, std::min(item.key_end, plan.positions[r] + 1) - item.key_begin);
    }
    if (item.partial >= 0) {
      EXPECT_TRUE(partials.insert(item.partial).second);
      // The split names the combine entry that merges it (the decode kernel's last block).
      ASSERT_GE(item.combine, 0);
      ASSERT_LT(item.combine, static_cast<int>(plan.combine.size()));
      const cuda::AttentionCombine& merge = plan.combine[item.combine];
      EXPECT_GE(item.partial, merge.first_partial);
      EXPECT_LT(item.partial, merge.first_partial + merge.n_splits);
      EXPECT_EQ(merge.row0, item.row0);
    } else {
      EXPECT_EQ(item.combine, -1);
    }
  }
  for (int r = 0; r < plan.num_rows; ++r) EXPECT_EQ(seen[r], plan.positions[r] + 1) << "row " << r;
  EXPECT_EQ(plan.max_item_tokens, max_item_tokens);  // picks the attention kernel's row count
  int slots = 0;
  for (const auto& t : plan.combine) {
    EXPECT_EQ(t.first_partial, slots);
    EXPECT_GE(t.n_splits, 2);
    slots += t.n_splits;
  }
  EXPECT_EQ(slots, plan.num_partials);
  EXPECT_EQ(static_cast<int>(partials.size()), plan.num_partials);
}

TEST(CudaStepPlanTest, ItemsCoverEveryVisibleKeyOnce) {
  ModelConfig c = SmallConfig();
  c.max_seq_len = 4096;
  const auto long_prompt = RandomTokens(37, c.vocab_size, 1);
  const auto one = RandomTokens(1, c.vocab_size, 2);
  const auto pages = Iota(200);
  ForwardBatch batch;
  batch.chunks.push_back({one, 3000, pages, true});          // long decode: split
  batch.chunks.push_back({long_prompt, 1000, pages, true});  // chunk over earlier context
  batch.chunks.push_back({one, 0, pages, true});             // first position
  for (int target : {0, 64, 100000}) ExpectPlanCovers(c, batch, target);
  c.n_heads = 32;  // a group of 16 query heads per KV head: several head tiles
  c.n_kv_heads = 2;
  c.head_dim = 160;
  for (int target : {0, 100000}) ExpectPlanCovers(c, batch, target);
}

TEST(CudaStepPlanTest, DecodeRowsSplitFinerThanPromptTiles) {
  ModelConfig c = SmallConfig();
  c.max_seq_len = 4096;
  KvCacheShape shape{c.n_layers, 512, 16, c.n_kv_heads, c.head_dim, DType::kBF16};
  cuda::StepPlanOptions options;
  options.target_blocks = 100000;  // a GPU far wider than the step
  const auto pages = Iota(20);
  const auto one = RandomTokens(1, c.vocab_size, 1), two = RandomTokens(2, c.vocab_size, 2);
  cuda::StepPlan plan;

  ForwardBatch decode;  // one row over 160 keys: five splits of 32
  decode.chunks.push_back({one, 159, pages, true});
  const Status built = cuda::BuildStepPlan(decode, c, shape, options, &plan);
  ASSERT_TRUE(built.ok()) << built.ToString();
  EXPECT_EQ(plan.items.size(), 5u);
  ASSERT_EQ(plan.combine.size(), 1u);
  EXPECT_EQ(plan.combine[0].n_splits, 5);
  EXPECT_EQ(plan.max_item_tokens, 1);

  ForwardBatch prompt;  // prompt tiles over the same keys stay whole (256 keys at least)
  prompt.chunks.push_back({two, 158, pages, true});
  ASSERT_TRUE(cuda::BuildStepPlan(prompt, c, shape, options, &plan).ok());
  EXPECT_TRUE(plan.combine.empty());
  EXPECT_EQ(plan.max_item_tokens, 2);
}

TEST(CudaStepPlanTest, RefusesWhatTheCpuBackendRefuses) {
  const ModelConfig c = SmallConfig();
  KvCacheShape shape{c.n_layers, 8, 4, c.n_kv_heads, c.head_dim, DType::kBF16};
  cuda::StepPlan plan;
  const std::vector<int32_t> bad_token = {1, 2, c.vocab_size}, ok = {1, 2, 3, 4, 5};
  const std::vector<int32_t> one_page = {0}, outside = {0, 99};
  auto code = [&](std::span<const int32_t> tokens, int start, std::span<const int32_t> pages) {
    ForwardBatch b;
    b.chunks.push_back({tokens, start, pages, true});
    return cuda::BuildStepPlan(b, c, shape, {}, &plan).code();
  };
  EXPECT_EQ(code(bad_token, 0, one_page), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(ok, 0, one_page), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(ok, 0, outside), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(ok, c.max_seq_len - 2, outside), StatusCode::kOutOfRange);
  EXPECT_EQ(code({}, 0, one_page), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pdserve::model
