#include "model/cuda/copy_tiles.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>

namespace pdserve::model::cuda {
namespace {

// Runs the tiles on host memory as the kernel would: what they copy must be the ranges' bytes.
void CopyOnHost(const std::vector<CopyTile>& tiles) {
  for (const CopyTile& t : tiles) {
    if (t.aligned16) {
      ASSERT_EQ(t.src % 16, 0u);
      ASSERT_EQ(t.dst % 16, 0u);
      ASSERT_EQ(t.bytes % 16, 0u);
    }
    std::memcpy(reinterpret_cast<void*>(t.dst), reinterpret_cast<const void*>(t.src), t.bytes);
  }
}

TEST(CopyTilesTest, AlignedRangeIsCutIntoFullTilesAndOneShortOne) {
  std::vector<CopyTile> tiles;
  AppendCopyTiles({{4096, 1 << 20, 3 * 1024 + 512}}, 1024, &tiles);
  ASSERT_EQ(tiles.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(tiles[i].src, 4096u + i * 1024);
    EXPECT_EQ(tiles[i].dst, (1u << 20) + i * 1024);
    EXPECT_EQ(tiles[i].bytes, 1024u);
    EXPECT_EQ(tiles[i].aligned16, 1u);
  }
  EXPECT_EQ(tiles[3].bytes, 512u);
  EXPECT_EQ(tiles[3].aligned16, 1u);
}

TEST(CopyTilesTest, UnalignedTailAndUnalignedRangesUseByteTiles) {
  std::vector<CopyTile> tiles;
  AppendCopyTiles({{0, 64, 40}, {3, 128, 20}}, 1024, &tiles);
  ASSERT_EQ(tiles.size(), 3u);
  EXPECT_EQ(tiles[0].bytes, 32u);
  EXPECT_EQ(tiles[0].aligned16, 1u);
  EXPECT_EQ(tiles[1].src, 32u);
  EXPECT_EQ(tiles[1].dst, 96u);
  EXPECT_EQ(tiles[1].bytes, 8u);
  EXPECT_EQ(tiles[1].aligned16, 0u);
  EXPECT_EQ(tiles[2].src, 3u);
  EXPECT_EQ(tiles[2].bytes, 20u);
  EXPECT_EQ(tiles[2].aligned16, 0u);
}

TEST(CopyTilesTest, TileSizeIsRoundedToSixteenBytes) {
  std::vector<CopyTile> tiles;
  const std::vector<CopyRange> r = {{0, 4096, 100}};
  AppendCopyTiles(r, 40, &tiles);  // 40 -> 32
  ASSERT_EQ(tiles.size(), 4u);
  EXPECT_EQ(tiles[0].bytes, 32u);
  EXPECT_EQ(tiles[2].bytes, 32u);
  EXPECT_EQ(tiles[3].bytes, 4u);
  tiles.clear();
  AppendCopyTiles(r, 0, &tiles);  // 0 -> 16
  EXPECT_EQ(tiles.size(), 7u);
}

TEST(CopyTilesTest, RandomRangesAreCopiedExactlyOnce) {
  std::mt19937 rng(7);
  std::vector<unsigned char> src(1 << 20), dst(1 << 20, 0), want(1 << 20, 0);
  for (auto& b : src) b = static_cast<unsigned char>(rng());
  std::vector<CopyRange> ranges;
  // Disjoint destination slots of 8 KiB; sources anywhere, sizes and offsets random.
  for (uint64_t slot = 0; slot + 8192 <= dst.size(); slot += 8192) {
    const uint64_t bytes = rng() % 8000 + 1;
    const uint64_t dst_off = slot + rng() % (8192 - bytes + 1);
    const uint64_t src_off = rng() % (src.size() - bytes);
    ranges.push_back({reinterpret_cast<uint64_t>(src.data()) + src_off,
                      reinterpret_cast<uint64_t>(dst.data()) + dst_off, bytes});
    std::memcpy(want.data() + dst_off, src.data() + src_off, bytes);
  }
  std::vector<CopyTile> tiles;
  AppendCopyTiles(ranges, 1024, &tiles);
  CopyOnHost(tiles);
  EXPECT_EQ(dst, want);
  uint64_t want_bytes = 0, got_bytes = 0;
  for (const CopyRange& r : ranges) want_bytes += r.bytes;
  for (const CopyTile& t : tiles) {
    got_bytes += t.bytes;
    EXPECT_LE(t.bytes, 1024u);
  }
  EXPECT_EQ(got_bytes, want_bytes);
}

TEST(CopyTilesTest, NothingToCopyGivesNoTiles) {
  std::vector<CopyTile> tiles;
  AppendCopyTiles({{0, 16, 0}}, 1024, &tiles);
  AppendCopyTiles({}, 1024, &tiles);
  EXPECT_TRUE(tiles.empty());
}

}  // namespace
}  // namespace pdserve::model::cuda
