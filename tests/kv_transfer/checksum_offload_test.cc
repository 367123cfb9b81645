// ParallelCrc32c gives Crc32c's value for every length and alignment, with any pool size and
// from several threads at once; AllowedCpus follows the process's affinity.
#include "kv_transfer/checksum_offload.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <random>
#include <thread>
#include <vector>

#include "kv_transfer/crc32c.h"

namespace pdserve::kv_transfer {
namespace {

std::vector<unsigned char> RandomBytes(size_t n, uint64_t seed) {
  std::vector<unsigned char> out(n);
  std::mt19937_64 rng(seed);
  for (auto& b : out) b = static_cast<unsigned char>(rng());
  return out;
}

TEST(ParallelCrc32c, MatchesCrc32cForEveryLengthAndAlignment) {
  constexpr size_t kSpan = ParallelCrc32c::kMinSpan;
  const std::vector<unsigned char> bytes = RandomBytes((10 << 20) + 64, 7);
  for (int threads : {1, 2, 3, 7}) {
    ParallelCrc32c crc(threads);
    const std::vector<size_t> lengths = {0,
                                         1,
                                         kSpan - 1,
                                         2 * kSpan - 1,
                                         2 * kSpan,
                                         2 * kSpan + 1,
                                         3 * kSpan + 17,
                                         2 << 20,
                                         (5 << 20) + 5,
                                         10 << 20};
    for (size_t n : lengths) {
      for (size_t offset : {size_t{0}, size_t{3}, size_t{64}}) {
        ASSERT_EQ(crc(bytes.data() + offset, n), Crc32c(bytes.data() + offset, n))
            << threads << " threads, " << n << " bytes at offset " << offset;
      }
    }
  }
}

TEST(ParallelCrc32c, AChangedByteInAnySpanChangesTheCrc) {
  std::vector<unsigned char> bytes = RandomBytes(4 << 20, 11);
  ParallelCrc32c crc(3);
  const uint32_t clean = crc(bytes.data(), bytes.size());
  for (size_t at : {size_t{0}, (size_t{1} << 20) + 1, (size_t{3} << 20) + 7, bytes.size() - 1}) {
    bytes[at] ^= 0x01;
    EXPECT_NE(crc(bytes.data(), bytes.size()), clean) << "byte " << at;
    EXPECT_EQ(crc(bytes.data(), bytes.size()), Crc32c(bytes.data(), bytes.size()));
    bytes[at] ^= 0x01;
  }
  EXPECT_EQ(crc(bytes.data(), bytes.size()), clean);
}

TEST(ParallelCrc32c, ConcurrentCallersShareThePoolAndEachGetsItsOwnCrc) {
  ParallelCrc32c crc(2);
  constexpr int kCallers = 6;
  std::vector<std::vector<unsigned char>> buffers;
  for (int i = 0; i < kCallers; ++i) buffers.push_back(RandomBytes((3 << 20) + 100 * i, 100 + i));
  std::vector<int> mismatches(kCallers, 0);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      const uint32_t want = Crc32c(buffers[i].data(), buffers[i].size());
      for (int round = 0; round < 20; ++round) {
        if (crc(buffers[i].data(), buffers[i].size()) != want) ++mismatches[i];
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int i = 0; i < kCallers; ++i) EXPECT_EQ(mismatches[i], 0) << "caller " << i;
}

TEST(AllowedCpus, FollowsTheAffinityOfTheCallingThread) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  EXPECT_EQ(AllowedCpus(), CPU_COUNT(&before));
  int first = 0;
  while (!CPU_ISSET(first, &before)) ++first;
  std::thread([first] {  // a thread of its own, so the test's affinity is left alone
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    EXPECT_EQ(AllowedCpus(), 1);
  })
      .join();
}

}  // namespace
}  // namespace pdserve::kv_transfer
