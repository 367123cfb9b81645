#include "kv_transfer/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace pdserve::kv_transfer {
namespace {

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32cReference("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, of 0xff, and an ascending sequence.
  std::vector<unsigned char> b(32, 0);
  EXPECT_EQ(Crc32c(b.data(), b.size()), 0x8A9136AAu);
  std::fill(b.begin(), b.end(), 0xff);
  EXPECT_EQ(Crc32c(b.data(), b.size()), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) b[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(Crc32c(b.data(), b.size()), 0x46DD794Eu);
}

TEST(Crc32c, MatchesReferenceAtEveryAlignmentAndLength) {
  std::mt19937_64 rng(7);
  std::vector<unsigned char> buf(3 * 8192 * 2 + 1000);
  for (auto& c : buf) c = static_cast<unsigned char>(rng());
  for (size_t len : {1ul, 7ul, 8ul, 9ul, 255ul, 256ul, 767ul, 768ul, 769ul, 5000ul, 24575ul,
                     24576ul, 24577ul, 40000ul}) {
    for (size_t off = 0; off < 9; ++off) {
      ASSERT_EQ(Crc32c(buf.data() + off, len), Crc32cReference(buf.data() + off, len))
          << "len " << len << " offset " << off;
    }
  }
}

TEST(Crc32c, ContinuesAcrossPieces) {
  std::string s = "The quick brown fox jumps over the lazy dog, many times over. ";
  for (int i = 0; i < 10; ++i) s += s;
  const uint32_t whole = Crc32c(s.data(), s.size());
  for (size_t cut : {0ul, 1ul, 100ul, s.size() / 2, s.size() - 3}) {
    EXPECT_EQ(Crc32c(s.data() + cut, s.size() - cut, Crc32c(s.data(), cut)), whole);
  }
}

TEST(Crc32c, CombinesPiecesCheckedApart) {
  std::mt19937_64 rng(5);
  std::vector<unsigned char> buf((3 << 20) + 777);
  for (auto& c : buf) c = static_cast<unsigned char>(rng());
  const uint32_t whole = Crc32c(buf.data(), buf.size());
  for (size_t cut :
       {0ul, 1ul, 63ul, 4096ul, 262144ul, buf.size() / 3, buf.size() - 1, buf.size()}) {
    const uint32_t a = Crc32c(buf.data(), cut);
    const uint32_t b = Crc32c(buf.data() + cut, buf.size() - cut);
    EXPECT_EQ(Crc32cCombine(a, b, buf.size() - cut), whole) << "cut " << cut;
  }
  // Many unequal pieces, joined left to right, as a chunk's spans are.
  uint32_t joined = 0;
  for (size_t at = 0, n = 1; at < buf.size(); at += n, n = n * 3 + 5) {
    n = std::min(n, buf.size() - at);
    joined = Crc32cCombine(joined, Crc32c(buf.data() + at, n), n);
  }
  EXPECT_EQ(joined, whole);
  // Against the bit-at-a-time reference, and a change anywhere shows.
  EXPECT_EQ(Crc32cCombine(Crc32cReference("1234", 4), Crc32cReference("56789", 5), 5), 0xE3069283u);
  buf[buf.size() / 2] ^= 1;
  EXPECT_NE(Crc32cCombine(Crc32c(buf.data(), 10), Crc32c(buf.data() + 10, buf.size() - 10),
                          buf.size() - 10),
            whole);
}

TEST(Crc32c, FromMemoryGivesTheSameValueAroundEveryBlockEdge) {
  std::mt19937_64 rng(9);
  const size_t block = kCrc32cFromMemoryBlock;
  std::vector<unsigned char> buf(4 * block + 4096);
  for (auto& c : buf) c = static_cast<unsigned char>(rng());
  for (size_t len : {0ul, 1ul, 64ul, block - 1, block, block + 1, block + 5 * 64 + 1,
                     2 * block - 63, 2 * block, 3 * block + 17, 4 * block}) {
    for (size_t off : {0ul, 3ul}) {
      ASSERT_EQ(Crc32cFromMemory(buf.data() + off, len), Crc32c(buf.data() + off, len))
          << "len " << len << " offset " << off;
    }
  }
  // It continues a previous value as Crc32c does.
  const uint32_t head = Crc32c(buf.data(), 100);
  EXPECT_EQ(Crc32cFromMemory(buf.data() + 100, 3 * block, head),
            Crc32c(buf.data(), 100 + 3 * block));
}

}  // namespace
}  // namespace pdserve::kv_transfer
