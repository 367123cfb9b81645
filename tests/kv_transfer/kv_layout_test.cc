#include "kv_transfer/kv_layout.h"

#include <gtest/gtest.h>

#include "kv_transfer/page_runs.h"
#include "kv_transfer/wire.h"

namespace pdserve::kv_transfer {
namespace {

using model::DType;

TEST(KvLayout, HashIsStableAndCoversEveryField) {
  auto base = KvLayout::Make("llama", DType::kBF16, 32, 8, 128, 16);
  ASSERT_TRUE(base.ok());
  auto again = KvLayout::Make("llama", DType::kBF16, 32, 8, 128, 16);
  EXPECT_EQ(base->hash, again->hash);
  EXPECT_NE(base->hash, KvLayout::Make("llama2", DType::kBF16, 32, 8, 128, 16)->hash);
  EXPECT_NE(base->hash, KvLayout::Make("llama", DType::kF16, 32, 8, 128, 16)->hash);
  EXPECT_NE(base->hash, KvLayout::Make("llama", DType::kBF16, 31, 8, 128, 16)->hash);
  EXPECT_NE(base->hash, KvLayout::Make("llama", DType::kBF16, 32, 4, 128, 16)->hash);
  EXPECT_NE(base->hash, KvLayout::Make("llama", DType::kBF16, 32, 8, 64, 16)->hash);
  EXPECT_NE(base->hash, KvLayout::Make("llama", DType::kBF16, 32, 8, 128, 32)->hash);
  KvLayout v2 = *base;
  v2.version = 2;
  EXPECT_NE(base->hash, ComputeLayoutHash(v2));
  EXPECT_EQ(base->page_bytes(), 2u * 16 * 8 * 128 * 2);
  EXPECT_EQ(base->Shape(10).page_bytes(), base->page_bytes());
}

TEST(KvLayout, FromConfigAndRefusals) {
  model::ModelConfig c;
  c.model_id = "tiny";
  c.n_layers = 2;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.dtype = DType::kF32;
  auto l = KvLayout::FromConfig(c, 16);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->n_layers, 2);
  EXPECT_EQ(l->dtype, DType::kF32);
  EXPECT_NE(KvLayout::FromConfig(c, 16, DType::kBF16)->hash, l->hash);
  EXPECT_FALSE(KvLayout::Make("", DType::kF32, 1, 1, 1, 1).ok());
  EXPECT_FALSE(KvLayout::Make("m", DType::kF32, 0, 1, 1, 1).ok());
  EXPECT_FALSE(KvLayout::Make("m", DType::kF32, 1, 1, 1, -3).ok());
}

TEST(PageRuns, CoalescesWhereBothSidesAreContiguous) {
  std::vector<int32_t> src = {4, 5, 6, 9, 10, 2, 3};
  std::vector<int32_t> dst = {0, 1, 2, 3, 4, 7, 9};
  auto runs = CoalesceRuns(src, dst);
  ASSERT_TRUE(runs.ok());
  std::vector<PageRun> want = {{4, 0, 3}, {9, 3, 2}, {2, 7, 1}, {3, 9, 1}};
  EXPECT_EQ(*runs, want);
  std::vector<PageRun> split = SplitRuns(*runs, 2);
  std::vector<PageRun> want_split = {{4, 0, 2}, {6, 2, 1}, {9, 3, 2}, {2, 7, 1}, {3, 9, 1}};
  EXPECT_EQ(split, want_split);
  EXPECT_FALSE(CoalesceRuns(src, std::vector<int32_t>{1}).ok());
  EXPECT_FALSE(CoalesceRuns(std::vector<int32_t>{-1}, std::vector<int32_t>{1}).ok());
}

// With a lead, chunks start small and double up to the cap, across run boundaries, and still
// cover every page once in order.
TEST(PageRuns, LeadChunksGrowToTheCap) {
  const std::vector<PageRun> runs = {{0, 100, 20}, {50, 200, 9}};
  const std::vector<PageRun> want = {{0, 100, 1},  {1, 101, 2},  {3, 103, 4}, {7, 107, 8},
                                     {15, 115, 5}, {50, 200, 8}, {58, 208, 1}};
  EXPECT_EQ(SplitRuns(runs, 8, 1), want);
  EXPECT_EQ(SplitRuns(runs, 8, 0), SplitRuns(runs, 8));  // no lead: every chunk the cap
  EXPECT_EQ(SplitRuns(runs, 4, 16).front().count, 4);    // a lead above the cap is the cap
}

TEST(Wire, HeaderRoundTripsAndRefusesDamage) {
  FrameHeader h;
  h.type = FrameType::kChunk;
  h.request_id = 0x1234567890abcdefull;
  h.layout_hash = 42;
  h.layer = 79;
  h.first_page = 9999;
  h.page_count = 17;
  h.byte_count = 17 * 64;
  h.payload_crc = 0xdeadbeef;
  HeaderBytes b = EncodeHeader(h);
  auto back = ParseHeader(b);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->request_id, h.request_id);
  EXPECT_EQ(back->layer, 79u);
  EXPECT_EQ(back->first_page, 9999);
  EXPECT_EQ(back->page_count, 17u);
  EXPECT_EQ(back->byte_count, h.byte_count);
  EXPECT_EQ(back->payload_crc, h.payload_crc);
  for (size_t i = 0; i < kHeaderBytes; ++i) {  // any flipped bit is caught
    HeaderBytes bad = b;
    bad[i] ^= 0x04;
    EXPECT_FALSE(ParseHeader(bad).ok()) << "byte " << i;
  }
  FrameHeader big;
  big.type = FrameType::kAck;
  big.byte_count = kMaxControlPayload + 1;
  EXPECT_FALSE(ParseHeader(EncodeHeader(big)).ok());
}

}  // namespace
}  // namespace pdserve::kv_transfer
