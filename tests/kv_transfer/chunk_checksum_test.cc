// ChunkChecksum: reads of any sizes, checked inline or span by span on a thread pool, give the
// payload's CRC32C, and the callback runs exactly once, inline when nothing is left on the pool.
#include "kv_transfer/chunk_checksum.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <vector>

#include "kv_transfer/crc32c.h"

namespace pdserve::kv_transfer {
namespace {

using namespace std::chrono_literals;

std::vector<unsigned char> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> b(n);
  for (auto& c : b) c = static_cast<unsigned char>(rng());
  return b;
}

// Feeds `bytes` as reads of random sizes up to `max_read`; returns (crc, inline_call) once done
// (the callback's state is shared, so a late or second call cannot touch freed memory; that it
// runs once is checked after a pool's join in ManyChunksAtOnceEachGetTheirOwnCrcOnce).
std::pair<uint32_t, bool> Checksum(boost::asio::thread_pool* pool,
                                   const std::vector<unsigned char>& bytes, size_t max_read,
                                   uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto checksum = ChunkChecksum::Start(pool);
  for (size_t at = 0; at < bytes.size();) {
    const size_t n = std::min<size_t>(bytes.size() - at, 1 + rng() % max_read);
    checksum->Add(bytes.data() + at, n);
    at += n;
  }
  struct Result {
    std::promise<std::pair<uint32_t, bool>> promise;
    std::atomic<int> calls{0};
  };
  auto result = std::make_shared<Result>();
  auto got = result->promise.get_future();
  checksum->Finish([result](uint32_t crc, bool inline_call) {
    if (result->calls++ == 0) result->promise.set_value({crc, inline_call});
  });
  if (got.wait_for(10s) != std::future_status::ready) {
    ADD_FAILURE() << "the checksum never finished";
    return {0, false};
  }
  const auto value = got.get();
  EXPECT_EQ(result->calls.load(), 1);
  return value;
}

TEST(ChunkChecksum, InlineFoldsEveryReadAndAnswersInFinish) {
  const auto bytes = RandomBytes((3 << 20) + 11, 1);
  const auto [crc, inline_call] = Checksum(nullptr, bytes, 300000, 2);
  EXPECT_EQ(crc, Crc32c(bytes.data(), bytes.size()));
  EXPECT_TRUE(inline_call);
}

TEST(ChunkChecksum, PoolSpansJoinToThePayloadsCrcForAnyReadSizes) {
  boost::asio::thread_pool pool(2);
  for (size_t size : {size_t{0}, size_t{1}, kChecksumSpan - 1, kChecksumSpan, kChecksumSpan + 1,
                      size_t{5} << 20}) {
    const auto bytes = RandomBytes(size, size);
    for (size_t max_read : {size_t{100}, size_t{65483}, kChecksumSpan, size_t{3} << 20}) {
      const auto [crc, inline_call] = Checksum(&pool, bytes, max_read, size + max_read);
      EXPECT_EQ(crc, Crc32c(bytes.data(), bytes.size())) << size << " " << max_read;
      // A payload shorter than a span never leaves the reading thread.
      if (size < kChecksumSpan) {
        EXPECT_TRUE(inline_call) << size;
      }
    }
  }
  pool.join();
}

TEST(ChunkChecksum, ManyChunksAtOnceEachGetTheirOwnCrcOnce) {
  std::vector<std::vector<unsigned char>> payloads;
  for (int i = 0; i < 24; ++i) payloads.push_back(RandomBytes((1 << 20) + i * 4099, 100 + i));
  std::vector<std::promise<uint32_t>> results(payloads.size());
  std::vector<std::atomic<int>> calls(payloads.size());
  boost::asio::thread_pool pool(2);  // last: joined before what its tasks use goes
  for (size_t i = 0; i < payloads.size(); ++i) {
    auto checksum = ChunkChecksum::Start(&pool);
    for (size_t at = 0; at < payloads[i].size(); at += 65536) {
      checksum->Add(payloads[i].data() + at, std::min<size_t>(65536, payloads[i].size() - at));
    }
    checksum->Finish([&, i](uint32_t crc, bool) {
      if (calls[i]++ == 0) results[i].set_value(crc);
    });
  }
  for (size_t i = 0; i < payloads.size(); ++i) {
    auto f = results[i].get_future();
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << i;
    EXPECT_EQ(f.get(), Crc32c(payloads[i].data(), payloads[i].size())) << i;
  }
  pool.join();
  for (auto& c : calls) EXPECT_EQ(c.load(), 1);
}

TEST(ChunkChecksum, AChangedByteChangesTheCrc) {
  boost::asio::thread_pool pool(2);
  auto bytes = RandomBytes(2 << 20, 9);
  const uint32_t clean = Crc32c(bytes.data(), bytes.size());
  bytes[(1 << 20) + 3] ^= 0x10;
  EXPECT_NE(Checksum(&pool, bytes, 65536, 3).first, clean);
  pool.join();
}

}  // namespace
}  // namespace pdserve::kv_transfer
