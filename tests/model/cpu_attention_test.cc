// The CPU attention kernel against a double-precision softmax attention, and its promise that a
// head's output does not depend on which other heads the call covers, nor on what it prefetches;
// with the SIMD pieces it rests on (eight horizontal sums at once, the vectorised exp).
#include "model/cpu_attention.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "model/cpu_matmul.h"
#include "model/simd.h"

namespace pdserve::model {
namespace {

struct Case {
  int kv_heads, group, head_dim, count;
};

// Key and value rows (kv_heads * head_dim floats each) scattered in one buffer in a shuffled
// order, as pages of a pool are.
struct Rows {
  std::vector<float> storage;
  std::vector<const float*> keys, values;
};

Rows MakeRows(const Case& c, std::mt19937& rng) {
  const int width = c.kv_heads * c.head_dim;
  Rows rows;
  rows.storage.resize(static_cast<size_t>(2) * c.count * width);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& v : rows.storage) v = d(rng);
  std::vector<int> order(2 * c.count);
  for (int i = 0; i < 2 * c.count; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  for (int j = 0; j < c.count; ++j) {
    rows.keys.push_back(&rows.storage[static_cast<size_t>(order[2 * j]) * width]);
    rows.values.push_back(&rows.storage[static_cast<size_t>(order[2 * j + 1]) * width]);
  }
  return rows;
}

// All query heads of one token.
std::vector<float> RandomQueries(const Case& c, std::mt19937& rng) {
  std::vector<float> q(static_cast<size_t>(c.kv_heads) * c.group * c.head_dim);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& v : q) v = d(rng);
  return q;
}

std::string Describe(const Case& c) {
  return "kv_heads " + std::to_string(c.kv_heads) + " group " + std::to_string(c.group) +
         " head_dim " + std::to_string(c.head_dim) + " count " + std::to_string(c.count);
}

std::vector<float> Attend(const Case& c, const Rows& rows, const std::vector<float>& q, int begin,
                          int end) {
  const AttentionRow a{q.data(),
                       rows.keys.data(),
                       rows.values.data(),
                       c.count,
                       begin,
                       end,
                       c.group,
                       c.head_dim,
                       1.0f / std::sqrt(float(c.head_dim))};
  std::vector<float> scratch(AttentionScratchFloats(a)), out(q.size(), NAN);
  AttendRow(a, scratch.data(), out.data());
  return out;
}

TEST(CpuAttentionTest, MatchesADoubleReferenceForEveryShape) {
  std::mt19937 rng(3);
  for (const Case c : {Case{1, 1, 64, 1}, Case{4, 3, 64, 7}, Case{4, 3, 64, 8}, Case{4, 3, 64, 9},
                       Case{2, 2, 64, 33}, Case{4, 3, 64, 200}, Case{2, 3, 12, 21},
                       Case{1, 4, 80, 45}, Case{2, 1, 128, 17}}) {
    SCOPED_TRACE(Describe(c));
    const Rows rows = MakeRows(c, rng);
    const std::vector<float> q = RandomQueries(c, rng);
    const std::vector<float> out = Attend(c, rows, q, 0, c.kv_heads);
    const double scale = 1.0 / std::sqrt(double(c.head_dim));
    for (int h = 0; h < c.kv_heads * c.group; ++h) {
      const int g = h / c.group;
      std::vector<double> w(c.count);
      double max = -1e300, sum = 0;
      for (int j = 0; j < c.count; ++j) {
        double s = 0;
        for (int i = 0; i < c.head_dim; ++i)
          s += double(q[h * c.head_dim + i]) * rows.keys[j][g * c.head_dim + i];
        w[j] = s * scale;
        max = std::max(max, w[j]);
      }
      for (double& x : w) sum += (x = std::exp(x - max));
      for (int i = 0; i < c.head_dim; ++i) {
        double ref = 0, mag = 0;
        for (int j = 0; j < c.count; ++j) {
          ref += w[j] / sum * rows.values[j][g * c.head_dim + i];
          mag += std::abs(w[j] / sum * rows.values[j][g * c.head_dim + i]);
        }
        ASSERT_NEAR(out[h * c.head_dim + i], ref, 2e-6 * mag + 1e-7) << "head " << h << " d " << i;
      }
    }
  }
}

TEST(CpuAttentionTest, AHeadGetsTheSameBitsWhateverElseTheCallCovers) {
  std::mt19937 rng(5);
  for (const Case c : {Case{4, 3, 64, 61}, Case{3, 2, 12, 19}}) {
    const Rows rows = MakeRows(c, rng);
    const std::vector<float> q = RandomQueries(c, rng);
    const std::vector<float> all = Attend(c, rows, q, 0, c.kv_heads);
    for (int g = 0; g < c.kv_heads; ++g) {
      const std::vector<float> one = Attend(c, rows, q, g, g + 1);
      const size_t at = static_cast<size_t>(g) * c.group * c.head_dim;
      EXPECT_EQ(std::memcmp(&one[at], &all[at], sizeof(float) * c.group * c.head_dim), 0)
          << "KV head " << g;
      // Heads outside the range are not written.
      if (g > 0) {
        EXPECT_TRUE(std::isnan(one[0]));
      }
    }
  }
}

TEST(CpuAttentionTest, Avx2AndAvx512GiveTheSameBits) {
  if (!SetMatMulIsa(MatMulIsa::kAvx512)) GTEST_SKIP() << "this CPU has no AVX-512";
  struct Restore {
    ~Restore() { SetMatMulIsa(MatMulIsa::kAvx512); }
  } restore;
  std::mt19937 rng(11);
  // Query heads per KV head from 1 to 5 (runs of 3, 2 and 1 at once), head sizes with and
  // without a tail past the last 64 or 16 columns, counts with and without a partial chunk.
  for (const Case c :
       {Case{4, 3, 64, 61}, Case{8, 4, 128, 40}, Case{2, 5, 80, 17}, Case{1, 1, 64, 9},
        Case{2, 2, 24, 33}, Case{3, 2, 12, 19}, Case{2, 3, 100, 13}}) {
    SCOPED_TRACE(Describe(c));
    const Rows rows = MakeRows(c, rng);
    const std::vector<float> q = RandomQueries(c, rng);
    ASSERT_TRUE(SetMatMulIsa(MatMulIsa::kAvx512));
    const std::vector<float> wide = Attend(c, rows, q, 0, c.kv_heads);
    ASSERT_TRUE(SetMatMulIsa(MatMulIsa::kAvx2));
    const std::vector<float> narrow = Attend(c, rows, q, 0, c.kv_heads);
    EXPECT_EQ(std::memcmp(wide.data(), narrow.data(), sizeof(float) * wide.size()), 0);
  }
}

TEST(CpuAttentionTest, PrefetchingTheNextRowsChangesNoBit) {
  // On both instruction sets: their value passes take different slots.
  struct Restore {
    ~Restore() { SetMatMulIsa(MatMulIsa::kAvx512); }
  } restore;
  for (const MatMulIsa isa : {MatMulIsa::kAvx2, MatMulIsa::kAvx512}) {
    if (!SetMatMulIsa(isa)) continue;
    SCOPED_TRACE(MatMulIsaName(isa));
    std::mt19937 rng(7);
    const Case c{4, 3, 64, 45};
    const Rows rows = MakeRows(c, rng);
    const Rows next = MakeRows(Case{4, 3, 64, 80}, rng);
    const std::vector<float> q = RandomQueries(c, rng);
    // Regions of odd sizes, one shorter than a cache line, empty ones first, between and last (a
    // stream starts past one, and a stream walks through one); more lines than the call has slots
    // to spread them over.
    const std::vector<MemoryRegion> regions = {{next.storage.data(), 0},
                                               {next.storage.data() + 3, 17},
                                               {next.storage.data(), 0},
                                               {next.storage.data() + 1, 100},
                                               {next.storage.data(), next.storage.size() * 4},
                                               {next.storage.data(), 0}};
    const std::vector<float> plain = Attend(c, rows, q, 0, c.kv_heads);
    AttentionRow a{q.data(),
                   rows.keys.data(),
                   rows.values.data(),
                   c.count,
                   0,
                   c.kv_heads,
                   c.group,
                   c.head_dim,
                   1.0f / std::sqrt(float(c.head_dim)),
                   regions};
    std::vector<float> scratch(AttentionScratchFloats(a)), out(q.size(), NAN);
    AttendRow(a, scratch.data(), out.data());
    EXPECT_EQ(std::memcmp(out.data(), plain.data(), sizeof(float) * out.size()), 0);
    // A long row with more to prefetch than the cap: the prefetches wait for the last slots.
    const Case long_case{4, 3, 64, 600};
    const Rows long_rows = MakeRows(long_case, rng);
    const std::vector<float> long_plain = Attend(long_case, long_rows, q, 0, c.kv_heads);
    AttentionRow long_a = a;
    long_a.keys = long_rows.keys.data();
    long_a.values = long_rows.values.data();
    long_a.count = long_case.count;
    const std::vector<MemoryRegion> big = {{long_rows.storage.data(), long_rows.storage.size() * 4},
                                           {next.storage.data(), next.storage.size() * 4}};
    long_a.prefetch = big;
    std::vector<float> long_scratch(AttentionScratchFloats(long_a)), long_out(q.size(), NAN);
    AttendRow(long_a, long_scratch.data(), long_out.data());
    EXPECT_EQ(std::memcmp(long_out.data(), long_plain.data(), sizeof(float) * long_out.size()), 0);
    // A row of one position: a few value slots, and none for scores, for everything.
    a.count = 1;
    std::vector<float> one(q.size(), NAN);
    AttendRow(a, scratch.data(), one.data());
    a.prefetch = {};
    std::vector<float> one_plain(q.size(), NAN);
    AttendRow(a, scratch.data(), one_plain.data());
    EXPECT_EQ(std::memcmp(one.data(), one_plain.data(), sizeof(float) * one.size()), 0);
  }
}

TEST(CpuAttentionTest, WarmingRegionsReadsOnlyWhatTheySpan) {
  // Each region ends right before a page no one may read: a read past a region's end faults.
  const size_t page = 4096;
  void* mem = mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* bytes = static_cast<char*>(mem);
  ASSERT_EQ(mprotect(bytes + page, page, PROT_NONE), 0);
  for (const size_t size :
       {size_t{0}, size_t{4}, size_t{64}, size_t{200}, size_t{256}, size_t{1000}, page}) {
    SCOPED_TRACE(size);
    const MemoryRegion region{bytes + page - size, size};
    WarmRegions({&region, 1});
  }
  munmap(mem, 3 * page);
}

TEST(SimdTest, EightHorizontalSumsAtOnceAreTheSameBits) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> d(-1e3f, 1e3f);
  for (int trial = 0; trial < 1000; ++trial) {
    __m256 v[8];
    for (auto& x : v) {
      alignas(32) float f[8];
      for (float& e : f) e = d(rng) * (trial % 3 == 0 ? 1e-6f : 1.0f);
      x = _mm256_load_ps(f);
    }
    alignas(32) float sums[8];
    _mm256_store_ps(sums, HorizontalSums8(v));
    for (int i = 0; i < 8; ++i) ASSERT_EQ(sums[i], HorizontalSum(v[i])) << trial << " " << i;
  }
}

TEST(SimdTest, ExpIsWithinTwoUlpAndNeverNaN) {
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    alignas(32) float e[8];
    _mm256_store_ps(e, Exp(_mm256_set1_ps(x)));
    const double want = std::exp(double(x));
    ASSERT_NEAR(e[0], want, 2.5e-7 * want) << x;
  }
  alignas(32) float e[8];
  _mm256_store_ps(
      e, Exp(_mm256_setr_ps(-88.0f, -1e4f, -FLT_MAX, -INFINITY, 0.0f, 89.0f, 1e4f, FLT_MAX)));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(e[i], 0.0f) << i;
  EXPECT_EQ(e[4], 1.0f);
  for (int i = 5; i < 8; ++i) EXPECT_TRUE(std::isfinite(e[i])) << i;
}

}  // namespace
}  // namespace pdserve::model
