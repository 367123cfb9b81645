// The element-wise and per-row kernels of the CUDA backend (kernels.h). Each follows the formula
// of model/cpu_backend.cc in the same order of operations, with f32 arithmetic; only the storage
// of weights, KV and GEMM inputs is bf16.
#include <math_constants.h>

#include <climits>

#include "model/cuda/device_math.cuh"
#include "model/cuda/kernels.h"

namespace pdserve::model::cuda {
namespace {

// Per-row kernels use wide blocks: at batch-1 decode one block does a row's whole work, so its
// time is the rounds of dependent loads each thread waits for (dim 4096: 4 elements a thread).
constexpr int kRowThreads = 1024;
constexpr int kElementThreads = 256;  // grid-stride element-wise kernels

// Blocks for a grid-stride loop over n elements.
unsigned GridFor(size_t n, int threads) {
  const size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65536 ? (blocks == 0 ? 1 : blocks) : 65536);
}

__global__ void __launch_bounds__(kRowThreads)
    EmbedKernel(const bf16* __restrict__ embed, const int32_t* __restrict__ tokens, int dim,
                float* __restrict__ x) {
  const int r = blockIdx.x;
  const bf16* e = embed + static_cast<size_t>(tokens[r]) * dim;
  float* out = x + static_cast<size_t>(r) * dim;
#pragma unroll 4
  for (int i = threadIdx.x; i < dim; i += blockDim.x) out[i] = __bfloat162float(e[i]);
}

__global__ void __launch_bounds__(kRowThreads)
    RmsNormKernel(const float* __restrict__ x, const int32_t* __restrict__ rows, int dim,
                  const float* __restrict__ weight, float eps, bf16* __restrict__ out) {
  const int r = blockIdx.x;
  const float* xr = x + static_cast<size_t>(rows ? rows[r] : r) * dim;
  float ss = 0.0f;
#pragma unroll 4
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
  ss = BlockSum(ss);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
  bf16* o = out + static_cast<size_t>(r) * dim;
#pragma unroll 4
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    o[i] = __float2bfloat16(xr[i] * scale * weight[i]);
  }
}

__global__ void RopeTableKernel(const int32_t* __restrict__ positions, const double* inv_freq,
                                int half, float* __restrict__ cos_table,
                                float* __restrict__ sin_table) {
  const int r = blockIdx.x;
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    double s, c;
    sincos(positions[r] * inv_freq[i], &s, &c);
    cos_table[static_cast<size_t>(r) * half + i] = static_cast<float>(c);
    sin_table[static_cast<size_t>(r) * half + i] = static_cast<float>(s);
  }
}

__global__ void __launch_bounds__(kRowThreads)
    RopeAndWriteKvKernel(const float* __restrict__ qkv, const float* __restrict__ bias, QkNorm norm,
                         const float* __restrict__ cos_table, const float* __restrict__ sin_table,
                         const int32_t* __restrict__ positions,
                         const int32_t* __restrict__ row_table, const int32_t* __restrict__ tables,
                         QkvShape s, float* __restrict__ q_out, bf16* __restrict__ kv_layer) {
  // With norm.q: 1 / rms of each head, query heads then key heads (n_heads + n_kv_heads).
  extern __shared__ float head_scale[];
  const int r = blockIdx.x;
  const int hd = s.head_dim, half = hd / 2;
  const int q_dim = s.n_heads * hd, kv_dim = s.n_kv_heads * hd;
  const float* in = qkv + static_cast<size_t>(r) * (q_dim + 2 * kv_dim);
  const float* cr = cos_table + static_cast<size_t>(r) * half;
  const float* sr = sin_table + static_cast<size_t>(r) * half;
  auto value = [&](int i) { return bias ? in[i] + bias[i] : in[i]; };

  if (norm.q) {  // the same for the whole block: every thread reaches the barrier or none
    // A warp a head: q's heads, then k's, which sit right after q's in the row.
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int h = warp; h < s.n_heads + s.n_kv_heads; h += blockDim.x / 32) {
      float ss = 0.0f;
      for (int i = lane; i < hd; i += 32) {
        const float x = value(h * hd + i);
        ss = fmaf(x, x, ss);
      }
      ss = WarpSum(ss);
      if (lane == 0) head_scale[h] = 1.0f / sqrtf(ss / static_cast<float>(hd) + norm.eps);
    }
    __syncthreads();
  }
  // Element i of head h (query heads 0..n_heads-1, then key heads) before its rotation: biased,
  // then normalised as model/cpu_backend.cc does (x * scale * weight).
  auto normed = [&](int h, int i, const float* weight) {
    const float x = value(h * hd + i);
    return norm.q ? x * head_scale[h] * weight[i] : x;
  };

  float* q = q_out + static_cast<size_t>(r) * q_dim;
  for (int idx = threadIdx.x; idx < s.n_heads * half; idx += blockDim.x) {
    const int h = idx / half, i = idx % half;
    const float a = normed(h, i, norm.q), b = normed(h, i + half, norm.q);
    q[h * hd + i] = a * cr[i] - b * sr[i];
    q[h * hd + i + half] = b * cr[i] + a * sr[i];
  }
  const int pos = positions[r];
  const int page = tables[row_table[r] + pos / s.page_size];
  // KvCacheShape::Offset(page, 0, slot) and Offset(page, 1, slot).
  bf16* k_dst = kv_layer + (static_cast<size_t>(page) * 2 * s.page_size + pos % s.page_size) *
                               static_cast<size_t>(kv_dim);
  bf16* v_dst = k_dst + static_cast<size_t>(s.page_size) * kv_dim;
  for (int idx = threadIdx.x; idx < s.n_kv_heads * half; idx += blockDim.x) {
    const int g = idx / half, i = idx % half;
    const float a = normed(s.n_heads + g, i, norm.k), b = normed(s.n_heads + g, i + half, norm.k);
    k_dst[g * hd + i] = __float2bfloat16(a * cr[i] - b * sr[i]);
    k_dst[g * hd + i + half] = __float2bfloat16(b * cr[i] + a * sr[i]);
  }
  for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    v_dst[i] = __float2bfloat16(value(q_dim + kv_dim + i));
  }
}

__global__ void SwiGluKernel(const bf16* __restrict__ gate_up, size_t n, int hidden,
                             bf16* __restrict__ act) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / hidden, j = i % hidden;
    const float g = __bfloat162float(gate_up[r * 2 * hidden + j]);
    const float u = __bfloat162float(gate_up[r * 2 * hidden + hidden + j]);
    act[i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
  }
}

// (value, index) pairs: the larger value wins, the lower index among equal values.
struct Best {
  float value;
  int index;
};

__device__ Best Better(Best a, Best b) {
  return (b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a;
}

__global__ void __launch_bounds__(kRowThreads)
    ArgmaxKernel(const float* __restrict__ logits, int vocab, int32_t* __restrict__ out) {
  __shared__ Best warp_best[32];
  const float* row = logits + static_cast<size_t>(blockIdx.x) * vocab;
  Best best{-CUDART_INF_F, INT_MAX};
  // 128K logits over 1024 threads: keep 8 loads in flight per thread.
#pragma unroll 8
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) best = Better(best, Best{row[i], i});
  for (int offset = 16; offset > 0; offset >>= 1) {
    Best other{__shfl_xor_sync(0xffffffffu, best.value, offset),
               __shfl_xor_sync(0xffffffffu, best.index, offset)};
    best = Better(best, other);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_best[warp] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) best = Better(best, warp_best[w]);
    out[blockIdx.x] = best.index == INT_MAX ? 0 : best.index;  // INT_MAX: a row of NaN
  }
}

__device__ uint64_t SplitMix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Box-Muller on two counter-based uniforms: element i of the stream named by seed.
__device__ float NormalAt(uint64_t seed, size_t i) {
  const uint64_t a = SplitMix64(seed ^ SplitMix64(2 * i));
  const uint64_t b = SplitMix64(seed ^ SplitMix64(2 * i + 1));
  const float u1 = (static_cast<float>(a >> 40) + 1.0f) * 0x1.0p-24f;  // (0, 1]
  const float u2 = static_cast<float>(b >> 40) * 0x1.0p-24f;           // [0, 1)
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

template <typename T>
__global__ void FillNormalKernel(T* __restrict__ out, size_t n, uint64_t seed, float mean,
                                 float stddev) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float v = mean + stddev * NormalAt(seed, i);
    if constexpr (sizeof(T) == 2) {
      out[i] = __float2bfloat16(v);
    } else {
      out[i] = v;
    }
  }
}

}  // namespace

cudaError_t LaunchEmbed(const bf16* embed, const int32_t* tokens, int rows, int dim, float* x,
                        cudaStream_t stream) {
  if (rows > 0) EmbedKernel<<<rows, kRowThreads, 0, stream>>>(embed, tokens, dim, x);
  return cudaGetLastError();
}

cudaError_t LaunchRmsNorm(const float* x, const int32_t* rows, int n_rows, int dim,
                          const float* weight, float eps, bf16* out, cudaStream_t stream) {
  if (n_rows > 0) {
    RmsNormKernel<<<n_rows, kRowThreads, 0, stream>>>(x, rows, dim, weight, eps, out);
  }
  return cudaGetLastError();
}

cudaError_t LaunchRopeTable(const int32_t* positions, int rows, const double* inv_freq, int half,
                            float* cos_table, float* sin_table, cudaStream_t stream) {
  if (rows > 0) {
    RopeTableKernel<<<rows, 64, 0, stream>>>(positions, inv_freq, half, cos_table, sin_table);
  }
  return cudaGetLastError();
}

cudaError_t LaunchRopeAndWriteKv(const float* qkv, const float* bias, const QkNorm& norm,
                                 const float* cos_table, const float* sin_table,
                                 const int32_t* positions, const int32_t* row_table,
                                 const int32_t* tables, int rows, const QkvShape& shape,
                                 float* q_out, bf16* kv_layer, cudaStream_t stream) {
  const int heads = shape.n_heads + shape.n_kv_heads;
  if (norm.q && (heads > kQkNormMaxHeads || !norm.k)) return cudaErrorInvalidValue;
  const size_t shared = norm.q ? heads * sizeof(float) : 0;
  if (rows > 0) {
    RopeAndWriteKvKernel<<<rows, kRowThreads, shared, stream>>>(qkv, bias, norm, cos_table,
                                                                sin_table, positions, row_table,
                                                                tables, shape, q_out, kv_layer);
  }
  return cudaGetLastError();
}

cudaError_t LaunchSwiGlu(const bf16* gate_up, int rows, int hidden, bf16* act,
                         cudaStream_t stream) {
  const size_t n = static_cast<size_t>(rows) * hidden;
  if (n > 0)
    SwiGluKernel<<<GridFor(n, kElementThreads), kElementThreads, 0, stream>>>(gate_up, n, hidden,
                                                                              act);
  return cudaGetLastError();
}

cudaError_t LaunchArgmax(const float* logits, int rows, int vocab, int32_t* out,
                         cudaStream_t stream) {
  if (rows > 0) ArgmaxKernel<<<rows, kRowThreads, 0, stream>>>(logits, vocab, out);
  return cudaGetLastError();
}

template <typename T>
cudaError_t FillNormal(T* out, size_t n, uint64_t seed, float mean, float stddev,
                       cudaStream_t stream) {
  if (n > 0) {
    FillNormalKernel<<<GridFor(n, kElementThreads), kElementThreads, 0, stream>>>(out, n, seed,
                                                                                  mean, stddev);
  }
  return cudaGetLastError();
}

cudaError_t LaunchFillNormal(bf16* out, size_t n, uint64_t seed, float mean, float stddev,
                             cudaStream_t stream) {
  return FillNormal(out, n, seed, mean, stddev, stream);
}

cudaError_t LaunchFillNormal(float* out, size_t n, uint64_t seed, float mean, float stddev,
                             cudaStream_t stream) {
  return FillNormal(out, n, seed, mean, stddev, stream);
}

}  // namespace pdserve::model::cuda
