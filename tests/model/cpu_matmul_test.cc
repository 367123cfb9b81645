// The CPU matrix products: right against a double-precision reference, and batch-invariant bit
// for bit (every row of every shape equals DotRow) on the AVX2 and the AVX-512 kernels alike,
// for each weight dtype, with K not a multiple of 8 and T not a multiple of the kernels' blocks.
#include "model/cpu_matmul.h"
#include "model/cpu_matmul_shared.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/rms_norm.h"

namespace pdserve::model {
namespace {

struct Weights {
  std::vector<uint16_t> half;
  std::vector<float> f32;
  Matrix m;
};

// Random weights in `dtype`; `values` gets what they hold, as f32.
Weights MakeWeights(DType dtype, int rows, int cols, std::mt19937& rng,
                    std::vector<float>* values) {
  std::normal_distribution<float> d(0.0f, 0.5f);
  Weights w;
  values->resize(static_cast<size_t>(rows) * cols);
  for (float& v : *values) v = d(rng);
  if (dtype == DType::kF32) {
    w.f32 = *values;
    w.m = {w.f32.data(), dtype, rows, cols};
    return w;
  }
  w.half.resize(values->size());
  for (size_t i = 0; i < values->size(); ++i) {
    w.half[i] = dtype == DType::kBF16 ? FloatToBF16((*values)[i]) : FloatToF16((*values)[i]);
    (*values)[i] = dtype == DType::kBF16 ? BF16ToFloat(w.half[i]) : F16ToFloat(w.half[i]);
  }
  w.m = {w.half.data(), dtype, rows, cols};
  return w;
}

std::vector<float> RandomRows(int t, int ld, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(t) * ld);
  for (float& v : x) v = d(rng);
  return x;
}

// Runs the body once per instruction set this CPU has, restoring the default after.
template <typename Body>
void ForEachIsa(Body body) {
  const MatMulIsa initial = ActiveMatMulIsa();
  for (MatMulIsa isa : {MatMulIsa::kAvx2, MatMulIsa::kAvx512}) {
    if (!SetMatMulIsa(isa)) continue;
    SCOPED_TRACE(MatMulIsaName(isa));
    body();
  }
  SetMatMulIsa(initial);
}

class CpuMatMulTest : public ::testing::TestWithParam<DType> {};

TEST_P(CpuMatMulTest, EveryRowEqualsDotRowAndTheDoubleReference) {
  const DType dtype = GetParam();
  std::mt19937 rng(7);
  for (int k : {7, 64, 77, 200}) {
    for (int n : {1, 5, 31}) {
      std::vector<float> wv;
      Weights w = MakeWeights(dtype, n, k, rng, &wv);
      for (int t : {1, 2, 3, 7, 8, 9, 16, 33}) {
        const int ldx = k + 3, ldy = n + 2;
        const std::vector<float> x = RandomRows(t, ldx, rng);
        ForEachIsa([&] {
          std::vector<float> y(static_cast<size_t>(t) * ldy, -1.0f);
          MatMul(x.data(), t, ldx, w.m, y.data(), ldy);
          for (int r = 0; r < t; ++r) {
            for (int j = 0; j < n; ++j) {
              const float got = y[static_cast<size_t>(r) * ldy + j];
              ASSERT_EQ(got, DotRow(&x[static_cast<size_t>(r) * ldx], w.m, j))
                  << "k " << k << " n " << n << " t " << t << " row " << r << " col " << j;
              double ref = 0, mag = 0;
              for (int i = 0; i < k; ++i) {
                const double p = static_cast<double>(x[static_cast<size_t>(r) * ldx + i]) *
                                 wv[static_cast<size_t>(j) * k + i];
                ref += p;
                mag += std::abs(p);
              }
              EXPECT_NEAR(got, ref, 1e-5 * mag + 1e-6);
            }
            // Columns past N are not written.
            for (int j = n; j < ldy; ++j) EXPECT_EQ(y[static_cast<size_t>(r) * ldy + j], -1.0f);
          }
        });
      }
    }
  }
}

TEST_P(CpuMatMulTest, AddStoreManyAndSwiGluEqualTheirPlainProducts) {
  const DType dtype = GetParam();
  std::mt19937 rng(11);
  const int k = 45, n = 29;
  std::vector<float> v;
  Weights a = MakeWeights(dtype, n, k, rng, &v), b = MakeWeights(dtype, n, k, rng, &v),
          c = MakeWeights(dtype, 13, k, rng, &v);
  for (int t : {1, 5, 12}) {
    const std::vector<float> x = RandomRows(t, k, rng);
    ForEachIsa([&] {
      std::vector<float> ya(t * n), yb(t * n), yc(t * 13);
      MatMul(x.data(), t, k, a.m, ya.data(), n);
      MatMul(x.data(), t, k, b.m, yb.data(), n);
      MatMul(x.data(), t, k, c.m, yc.data(), 13);

      std::vector<float> residual = RandomRows(t, n, rng), added = residual;
      MatMul(x.data(), t, k, a.m, added.data(), n, MatMulStore::kAdd);
      for (int i = 0; i < t * n; ++i) ASSERT_EQ(added[i], residual[i] + ya[i]);

      std::vector<float> ma(t * n), mb(t * n), mc(t * 13);
      const MatMulTarget targets[] = {
          {&a.m, ma.data(), n}, {&b.m, mb.data(), n}, {&c.m, mc.data(), 13}};
      MatMulMany(x.data(), t, k, targets);
      EXPECT_EQ(ma, ya);
      EXPECT_EQ(mb, yb);
      EXPECT_EQ(mc, yc);

      std::vector<float> swiglu(t * n);
      MatMulSwiGlu(x.data(), t, k, a.m, b.m, swiglu.data(), n);
      for (int i = 0; i < t * n; ++i) {
        const double silu = ya[i] / (1.0 + std::exp(-static_cast<double>(ya[i])));
        ASSERT_NEAR(swiglu[i], silu * yb[i], 1e-6 * std::abs(silu * yb[i]) + 1e-30) << i;
      }
    });
  }
}

// A norm applied as the products read X is the same bits as normalising X first.
TEST_P(CpuMatMulTest, RowNormGivesTheBitsOfNormalisingFirst) {
  const DType dtype = GetParam();
  std::mt19937 rng(17);
  const int k = 72, n = 29;
  std::vector<float> v;
  Weights a = MakeWeights(dtype, n, k, rng, &v), b = MakeWeights(dtype, n, k, rng, &v);
  std::vector<float> weight = RandomRows(1, k, rng);
  const RowNorm norm{weight.data(), 1e-5f};
  for (int t : {1, 5, 12, 33}) {
    const int ldx = k + 5;
    const std::vector<float> x = RandomRows(t, ldx, rng);
    std::vector<float> normed(static_cast<size_t>(t) * k);
    for (int r = 0; r < t; ++r) {
      RmsNorm(&x[static_cast<size_t>(r) * ldx], weight.data(), k, norm.eps, &normed[r * k]);
    }
    ForEachIsa([&] {
      std::vector<float> plain_a(t * n), plain_b(t * n), fused_a(t * n), fused_b(t * n);
      const MatMulTarget plain[] = {{&a.m, plain_a.data(), n}, {&b.m, plain_b.data(), n}};
      const MatMulTarget fused[] = {{&a.m, fused_a.data(), n}, {&b.m, fused_b.data(), n}};
      MatMulMany(normed.data(), t, k, plain);
      MatMulMany(x.data(), t, ldx, fused, &norm);
      EXPECT_EQ(fused_a, plain_a) << "t " << t;
      EXPECT_EQ(fused_b, plain_b) << "t " << t;
      std::vector<float> plain_swiglu(t * n), fused_swiglu(t * n);
      MatMulSwiGlu(normed.data(), t, k, a.m, b.m, plain_swiglu.data(), n);
      MatMulSwiGlu(x.data(), t, ldx, a.m, b.m, fused_swiglu.data(), n, &norm);
      EXPECT_EQ(fused_swiglu, plain_swiglu) << "t " << t;
    });
  }
}

// A very large X (over 16 MB) is prepared once for all threads, a smaller one by each thread
// for itself: the same rows give the same bits either way.
TEST_P(CpuMatMulTest, PromptAndDecodeSizedXGiveTheSameBits) {
  const DType dtype = GetParam();
  std::mt19937 rng(19);
  const int k = 2560, n = 24, big = 1700, small = 12;  // 1700 x 2560 floats: 17.4 MB
  std::vector<float> v;
  Weights gate = MakeWeights(dtype, n, k, rng, &v), up = MakeWeights(dtype, n, k, rng, &v);
  const std::vector<float> x = RandomRows(big, k, rng);
  std::vector<float> weight = RandomRows(1, k, rng);
  const RowNorm norm{weight.data(), 1e-5f};
  const int initial_threads = omp_get_max_threads();
  omp_set_num_threads(2);
  ForEachIsa([&] {
    std::vector<float> all(big * n), all_swiglu(big * n);
    MatMul(x.data(), big, k, gate.m, all.data(), n);
    MatMulSwiGlu(x.data(), big, k, gate.m, up.m, all_swiglu.data(), n, &norm);
    for (int first : {0, 200, big - small}) {
      std::vector<float> some(small * n), some_swiglu(small * n);
      MatMul(&x[static_cast<size_t>(first) * k], small, k, gate.m, some.data(), n);
      MatMulSwiGlu(&x[static_cast<size_t>(first) * k], small, k, gate.m, up.m, some_swiglu.data(),
                   n, &norm);
      for (int i = 0; i < small * n; ++i) {
        ASSERT_EQ(some[i], all[first * n + i]) << "rows from " << first << ", value " << i;
        ASSERT_EQ(some_swiglu[i], all_swiglu[first * n + i])
            << "rows from " << first << ", value " << i;
      }
    }
  });
  omp_set_num_threads(initial_threads);
}

// Prompt-sized X (past kPanelOrderXBytes) takes the block order, decode-sized X the panel order:
// with a k % 16 tail and a W row count that leaves single rows after the wide kernels, every
// output equals DotRow and a few rows alone give the same bits, under any thread count.
TEST_P(CpuMatMulTest, BlockAndPanelOrdersWithTailsGiveDotRowBits) {
  const DType dtype = GetParam();
  std::mt19937 rng(29);
  const int k = 77, n = 31, big = 900;  // 900 x 77 floats: 277 KB, past the panel order's bound
  ASSERT_GT(static_cast<size_t>(big) * k * sizeof(float), kPanelOrderXBytes);
  std::vector<float> v;
  Weights w = MakeWeights(dtype, n, k, rng, &v);
  const std::vector<float> x = RandomRows(big, k, rng);
  const int initial_threads = omp_get_max_threads();
  ForEachIsa([&] {
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      std::vector<float> all(static_cast<size_t>(big) * n);
      MatMul(x.data(), big, k, w.m, all.data(), n);
      for (int r = 0; r < big; ++r) {
        for (int j = 0; j < n; ++j) {
          ASSERT_EQ(all[r * n + j], DotRow(&x[static_cast<size_t>(r) * k], w.m, j))
              << "row " << r << " column " << j << " threads " << threads;
        }
      }
      const int first = 431, some = 7;
      std::vector<float> part(static_cast<size_t>(some) * n);
      MatMul(&x[static_cast<size_t>(first) * k], some, k, w.m, part.data(), n);
      for (int i = 0; i < some * n; ++i) {
        ASSERT_EQ(part[i], all[first * n + i]) << "value " << i << " threads " << threads;
      }
    }
  });
  omp_set_num_threads(initial_threads);
}

// Rows are split between threads that steal from each other (row_range.h): any thread count,
// and so any split, gives the same bits, in products long enough for several pieces per thread.
TEST_P(CpuMatMulTest, ThreadCountsAndRowSplitsKeepTheBits) {
  const DType dtype = GetParam();
  std::mt19937 rng(13);
  const int initial_threads = omp_get_max_threads();
  for (int k : {77, 200}) {
    const int n = 1000;
    std::vector<float> v;
    Weights gate = MakeWeights(dtype, n, k, rng, &v), up = MakeWeights(dtype, n, k, rng, &v);
    for (int t : {1, 3, 9}) {
      const std::vector<float> x = RandomRows(t, k, rng);
      ForEachIsa([&] {
        std::vector<float> one(t * n), one_swiglu(t * n);
        omp_set_num_threads(1);
        MatMul(x.data(), t, k, gate.m, one.data(), n);
        MatMulSwiGlu(x.data(), t, k, gate.m, up.m, one_swiglu.data(), n);
        for (int j = 0; j < n; j += 97) ASSERT_EQ(one[j], DotRow(x.data(), gate.m, j));
        for (int threads : {2, 3, 7}) {
          omp_set_num_threads(threads);
          std::vector<float> many(t * n), many_swiglu(t * n), up_y(t * n), up_alone(t * n);
          MatMul(x.data(), t, k, gate.m, many.data(), n);
          MatMulSwiGlu(x.data(), t, k, gate.m, up.m, many_swiglu.data(), n);
          const MatMulTarget targets[] = {{&gate.m, many.data(), n}, {&up.m, up_y.data(), n}};
          MatMulMany(x.data(), t, k, targets);
          EXPECT_EQ(many, one) << "k " << k << " t " << t << " threads " << threads;
          EXPECT_EQ(many_swiglu, one_swiglu) << "k " << k << " t " << t << " threads " << threads;
          omp_set_num_threads(1);
          MatMul(x.data(), t, k, up.m, up_alone.data(), n);
          EXPECT_EQ(up_y, up_alone) << "k " << k << " t " << t << " threads " << threads;
        }
      });
    }
  }
  omp_set_num_threads(initial_threads);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuMatMulTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

TEST(CpuMatMulIsaTest, NamesAndPinning) {
  EXPECT_STREQ(MatMulIsaName(MatMulIsa::kAvx2), "avx2");
  EXPECT_STREQ(MatMulIsaName(MatMulIsa::kAvx512), "avx512");
  const MatMulIsa initial = ActiveMatMulIsa();
  ASSERT_TRUE(SetMatMulIsa(MatMulIsa::kAvx2));  // every supported CPU has AVX2
  EXPECT_EQ(ActiveMatMulIsa(), MatMulIsa::kAvx2);
  SetMatMulIsa(initial);
}

}  // namespace
}  // namespace pdserve::model
