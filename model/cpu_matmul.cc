#include "model/cpu_matmul.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "model/cpu_matmul_bf16.h"
#include "model/cpu_matmul_f32.h"
#include "model/rms_norm.h"
#include "model/row_split.h"
#include "model/simd.h"

namespace pdserve::model {
namespace {

// ---- Instruction set ----

bool CpuHasAvx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

MatMulIsa InitialIsa() {
  // PDSERVE_MATMUL_ISA=avx2 pins the AVX2 kernels (benchmarks, comparisons between machines).
  const char* pinned = std::getenv("PDSERVE_MATMUL_ISA");
  if (pinned && std::strcmp(pinned, "avx2") == 0) return MatMulIsa::kAvx2;
  return CpuHasAvx512() ? MatMulIsa::kAvx512 : MatMulIsa::kAvx2;
}

std::atomic<MatMulIsa>& Isa() {
  static std::atomic<MatMulIsa> isa{InitialIsa()};
  return isa;
}

// ---- Running products: W rows cut into blocks, handed out to threads dynamically ----

struct Product {
  const Matrix* w;
  float* y;
  int ldy;
  bool add;
};

// X as the kernels want it: packed in pairs for the AVX-512 f32/f16 kernels (T > 1), and in
// the even/odd order for bf16 weights.
struct PreparedX {
  const float* x;
  int t, ldx;
  const f32::PackedPairs* pairs = nullptr;
  const bf16::PackedX* bf16 = nullptr;
};

// What a product call's X is and which packings its weights want.
struct XSource {
  const float* x;
  int t, ldx, k;
  bool wants_pairs, wants_bf16;
  const RowNorm* norm = nullptr;  // X's rows normalised first
};

// Packs X into the calling thread's own buffers (RunSplit says which threads call it).
PreparedX Prepare(const XSource& source) {
  thread_local std::vector<float> normed;
  thread_local f32::PackedPairs pairs;
  thread_local bf16::PackedX even_odd;
  XSource s = source;
  if (s.norm) {
    // Every thread normalises every row: a few operations a value, against the thousands of a
    // product, and no pass nor synchronisation of its own.
    normed.resize(static_cast<size_t>(s.t) * s.k);
    for (int r = 0; r < s.t; ++r) {
      RmsNorm(s.x + static_cast<size_t>(r) * s.ldx, s.norm->weight, s.k, s.norm->eps,
              normed.data() + static_cast<size_t>(r) * s.k);
    }
    s.x = normed.data();
    s.ldx = s.k;
  }
  PreparedX p{s.x, s.t, s.ldx};
  const bool avx512 = s.t > 1 && Isa().load(std::memory_order_relaxed) == MatMulIsa::kAvx512;
  if (s.wants_pairs && avx512) {
    f32::PackPairs(s.x, s.t, s.ldx, s.k / 8, &pairs);
    p.pairs = &pairs;
  }
  if (s.wants_bf16) {
    bf16::Pack(s.x, s.t, s.ldx, s.k, avx512, &even_odd);
    p.bf16 = &even_odd;
  }
  return p;
}

// Rows [n0, n1) of one product into y (pointing at column n0).
void RunRows(const PreparedX& x, const Matrix& w, bool add, int n0, int n1, float* y, int ldy) {
  if (w.dtype == DType::kBF16) return bf16::Rows(*x.bf16, x.x, x.t, x.ldx, w, add, n0, n1, y, ldy);
  f32::Rows(x.pairs, x.x, x.t, x.ldx, w, add, n0, n1, y, ldy);
}

// Decode's streams a thread: four for every dtype. One core's reads reach the memory's rate
// only with several sequential streams in flight, whatever the arithmetic a byte; the count
// follows the read probe and decode measurements in docs/benchmarks.md (Roofline and read probe).
constexpr int kDecodeStreams = 4;
constexpr int kStreamStep = 16;  // rows a piece takes from each stream

// `count` runs of one decode (T = 1) product, walked side by side.
void RunStreams(const PreparedX& x, const Matrix& w, bool add, const RowRun* runs, int count) {
  if (w.dtype == DType::kBF16) return bf16::StreamRuns(*x.bf16, x.x, w, runs, count, add);
  f32::StreamRuns(x.x, w, runs, count, add);
}

// out[i] = silu(g[i]) * u[i] = g / (1 + e^-g) * u, 8 at a time with simd.h's Exp. The last
// n % 8 go through the same vector code (padded), so a column's bits do not depend on where the
// row split put it.
void SiluTimes(const float* g, const float* u, int n, float* out) {
  auto eight = [](__m256 gv, __m256 uv) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), gv));
    return _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), uv);
  };
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, eight(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
  }
  if (i == n) return;
  float gt[8] = {}, ut[8] = {}, ot[8];
  std::copy(g + i, g + n, gt);
  std::copy(u + i, u + n, ut);
  _mm256_storeu_ps(ot, eight(_mm256_loadu_ps(gt), _mm256_loadu_ps(ut)));
  std::copy(ot, ot + (n - i), out + i);
}

// How a product's rows are handed out. Decode: kDecodeStreams sub-ranges a thread, kStreamStep
// rows of each at a time (a piece is a few microseconds of streaming, and its end the only
// imbalance left). Otherwise one range a thread, in pieces of L2BlockRows rows (the block a
// prompt's X passes over), shrinking to kRowUnit rows toward the range's end (a whole block is
// tens of microseconds at T = 32: smaller last pieces even out the threads' ends;
// docs/benchmarks.md, Decode and prefill throughput).
struct Split {
  int streams, step, min_step;  // pieces of `step` rows, down to `min_step` near the end
};

Split SplitFor(int t, DType dtype, int cols) {
  if (t == 1) return {kDecodeStreams, kStreamStep, kStreamStep};
  return {1, L2BlockRows(static_cast<size_t>(cols) * DTypeSize(dtype)), kRowUnit};
}

// One piece of work's rows of w, piece c's outputs at y[c]: decode's pieces side by side
// through StreamRuns, others one by one through RunRows.
void RunPieces(const PreparedX& x, const Matrix& w, bool add, const Piece* pieces, int count,
               float* const* y, int ldy) {
  if (x.t == 1) {
    RowRun runs[kMaxStreams];
    for (int c = 0; c < count; ++c) runs[c] = {pieces[c].n0, pieces[c].n1, y[c]};
    return RunStreams(x, w, add, runs, count);
  }
  for (int c = 0; c < count; ++c) RunRows(x, w, add, pieces[c].n0, pieces[c].n1, y[c], ldy);
}

// X up to this size is prepared by every thread for itself; larger X (a long prompt's on a big
// model) once, by the calling thread, for all. One shared copy cost more than it saved: the
// calling thread had to take back, line by line, what the other threads read in the last
// product, and packing took longer than alone while the other threads waited
// (docs/benchmarks.md, Matrix kernels). Past the bound, a copy per thread would cost too much
// memory (T = 2048 at K = 14336 is 117 MB a copy), and the packing is a sliver of the product's
// time anyway.
constexpr size_t kPerThreadXBytes = size_t{16} << 20;

// Runs run(x, product, pieces, count) on every OpenMP thread over products of `rows` rows each,
// split as SplitFor(t, dtype, cols) says; x is X as prepared for that thread.
template <typename Run>
void RunSplit(std::span<const int> rows, const XSource& source, DType dtype, const Run& run) {
  const Split how = SplitFor(source.t, dtype, source.k);
  const int threads = omp_get_max_threads();
  RowSplit split(rows, threads, how.streams);
  const bool per_thread =
      static_cast<size_t>(source.t) * source.k * sizeof(float) <= kPerThreadXBytes;
  std::optional<PreparedX> shared;
  if (!per_thread) shared = Prepare(source);
#pragma omp parallel num_threads(threads)
  {
    const PreparedX x = per_thread ? Prepare(source) : *shared;
    split.Work(
        omp_get_thread_num(), how.step, how.min_step,
        [&](size_t product, const Piece* pieces, int count) { run(x, product, pieces, count); });
  }
}

void RunProducts(const float* x, int t, int ldx, std::span<const Product> products,
                 const RowNorm* norm = nullptr) {
  if (t <= 0 || products.empty()) return;
  bool any_bf16 = false, any_other = false;
  for (const Product& p : products) (p.w->dtype == DType::kBF16 ? any_bf16 : any_other) = true;
  const XSource source{x, t, ldx, products[0].w->cols, any_other, any_bf16, norm};
  thread_local std::vector<int> rows;
  rows.clear();
  for (const Product& p : products) rows.push_back(p.w->rows);
  RunSplit(rows, source, any_bf16 ? DType::kBF16 : products[0].w->dtype,
           [&](const PreparedX& prepared, size_t i, const Piece* pieces, int count) {
             const Product& p = products[i];
             float* y[kMaxStreams];
             for (int c = 0; c < count; ++c) y[c] = p.y + pieces[c].n0;
             RunPieces(prepared, *p.w, p.add, pieces, count, y, p.ldy);
           });
}

}  // namespace

void MatMul(const float* x, int t, int ldx, const Matrix& w, float* y, int ldy, MatMulStore store) {
  if (w.rows <= 0) return;
  const Product p{&w, y, ldy, store == MatMulStore::kAdd};
  RunProducts(x, t, ldx, {&p, 1});
}

void MatMulMany(const float* x, int t, int ldx, std::span<const MatMulTarget> targets,
                const RowNorm* norm) {
  thread_local std::vector<Product> products;
  products.clear();
  for (const MatMulTarget& target : targets) {
    if (target.w->rows > 0) products.push_back({target.w, target.y, target.ldy, false});
  }
  RunProducts(x, t, ldx, products, norm);
}

void MatMulSwiGlu(const float* x, int t, int ldx, const Matrix& gate, const Matrix& up, float* out,
                  int ldo, const RowNorm* norm) {
  const int n = gate.rows;
  if (t <= 0 || n <= 0) return;
  const bool is_bf16 = gate.dtype == DType::kBF16;
  const XSource source{x, t, ldx, gate.cols, !is_bf16, is_bf16, norm};
  RunSplit(std::span<const int>(&n, 1), source, gate.dtype,
           [&](const PreparedX& prepared, size_t, const Piece* pieces, int count) {
             // g and u: [t][width], the pieces side by side.
             int offset[kMaxStreams], width = 0;
             for (int c = 0; c < count; ++c) {
               offset[c] = width;
               width += pieces[c].n1 - pieces[c].n0;
             }
             thread_local std::vector<float> g, u;
             g.resize(static_cast<size_t>(t) * width);
             u.resize(g.size());
             float* gy[kMaxStreams];
             float* uy[kMaxStreams];
             for (int c = 0; c < count; ++c) {
               gy[c] = g.data() + offset[c];
               uy[c] = u.data() + offset[c];
             }
             RunPieces(prepared, gate, false, pieces, count, gy, width);
             RunPieces(prepared, up, false, pieces, count, uy, width);
             for (int r = 0; r < t; ++r) {
               for (int c = 0; c < count; ++c) {
                 float* o = out + static_cast<size_t>(r) * ldo + pieces[c].n0;
                 const float* gr = g.data() + static_cast<size_t>(r) * width + offset[c];
                 const float* ur = u.data() + static_cast<size_t>(r) * width + offset[c];
                 SiluTimes(gr, ur, pieces[c].n1 - pieces[c].n0, o);
               }
             }
           });
}

float DotRow(const float* x, const Matrix& w, int row) {
  return w.dtype == DType::kBF16 ? bf16::DotRow(x, w, row) : f32::DotRow(x, w, row);
}

MatMulIsa ActiveMatMulIsa() { return Isa().load(); }

bool SetMatMulIsa(MatMulIsa isa) {
  if (isa == MatMulIsa::kAvx512 && !CpuHasAvx512()) return false;
  Isa().store(isa);
  return true;
}

const char* MatMulIsaName(MatMulIsa isa) { return isa == MatMulIsa::kAvx512 ? "avx512" : "avx2"; }

}  // namespace pdserve::model
