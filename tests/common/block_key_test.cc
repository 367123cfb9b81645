#include "common/block_key.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace pdserve {
namespace {

std::vector<int32_t> Iota(int from, int count) {
  std::vector<int32_t> tokens(count);
  std::iota(tokens.begin(), tokens.end(), from);
  return tokens;
}

// Values computed independently with Python's hashlib:
//   sha256(struct.pack('<QQ', parent, salt) + b''.join(struct.pack('<I', t) ...))[:8], '<Q'
// A change here changes every cache key in a deployment, so gateways and workers of different
// builds would disagree: it must be deliberate.
TEST(BlockKey, KnownValues) {
  EXPECT_EQ(ChainBlockKey(0, 0x1234, Iota(0, 16)), 0xfc5c72afffced194ull);
  EXPECT_EQ(ChainBlockKey(0xfc5c72afffced194ull, 0x1234, Iota(16, 16)), 0xcaaa0b3a9c435a49ull);
  EXPECT_EQ(ChainBlockKey(0, 0x1235, Iota(0, 16)), 0x7337914b38bd2880ull);
  const std::vector<int32_t> negative(4, -1);
  EXPECT_EQ(ChainBlockKey(0, 0x1234, negative), 0xc59092de0aa8eceaull);
}

TEST(BlockKey, PromptKeysCoverFullPagesOnly) {
  const auto tokens = Iota(0, 40);
  const auto keys = PromptBlockKeys(0x1234, tokens, 16);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0], 0xfc5c72afffced194ull);
  EXPECT_EQ(keys[1], 0xcaaa0b3a9c435a49ull);
  EXPECT_TRUE(PromptBlockKeys(0x1234, Iota(0, 15), 16).empty());
  EXPECT_TRUE(PromptBlockKeys(0x1234, tokens, 0).empty());
}

TEST(BlockKey, AKeyDependsOnEveryEarlierToken) {
  auto a = Iota(0, 48);
  auto b = a;
  b[3] = 999;  // differs in the first page only
  const auto ka = PromptBlockKeys(7, a, 16);
  const auto kb = PromptBlockKeys(7, b, 16);
  ASSERT_EQ(ka.size(), 3u);
  for (size_t i = 0; i < ka.size(); ++i) EXPECT_NE(ka[i], kb[i]) << "page " << i;
  b = a;
  b[40] = 999;  // the last page only
  const auto kc = PromptBlockKeys(7, b, 16);
  EXPECT_EQ(ka[0], kc[0]);
  EXPECT_EQ(ka[1], kc[1]);
  EXPECT_NE(ka[2], kc[2]);
}

TEST(BlockKey, ExtendMatchesPromptKeys) {
  const auto tokens = Iota(100, 70);
  std::vector<BlockKey> keys;
  for (int n = 0; n <= 70; n += 5) {
    ExtendBlockKeys(keys, 9, std::span<const int32_t>(tokens).first(n), 16);
    EXPECT_EQ(keys.size(), static_cast<size_t>(n / 16));
  }
  EXPECT_EQ(keys, PromptBlockKeys(9, tokens, 16));
}

}  // namespace
}  // namespace pdserve
