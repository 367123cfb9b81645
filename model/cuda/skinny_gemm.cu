// The skinny GEMM of decode steps (kernels.h, LaunchSkinnyGemm): with a handful of rows the
// product is bound by reading the weights once. One row goes to SplitKGemvKernel; from two rows
// on, each warp streams two weight rows with 16-byte loads (cache-streaming: they are not read
// again this step) and dots them with every x row, which stays in L1/L2. f32 accumulation; the
// warp's lanes are summed at the end.
#include "model/cuda/device_math.cuh"
#include "model/cuda/kernels.h"

namespace pdserve::model::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kFeaturesPerWarp = 2;  // weight rows (outputs) per warp
constexpr int kUnroll = 4;           // 256-column slices loaded ahead
constexpr int kThreads = kWarpsPerBlock * 32;

template <int M, bool kBf16Out>
__global__ void __launch_bounds__(kThreads)
    SkinnyGemmKernel(const bf16* __restrict__ x, int k, const bf16* __restrict__ w, int n,
                     void* __restrict__ y, bool accumulate) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = (blockIdx.x * kWarpsPerBlock + warp) * kFeaturesPerWarp;
  if (n0 >= n) return;  // the whole warp leaves; nothing below synchronises the block
  const bf16* rows[kFeaturesPerWarp];
#pragma unroll
  for (int j = 0; j < kFeaturesPerWarp; ++j) {
    rows[j] = w + static_cast<size_t>(min(n0 + j, n - 1)) * k;  // a past-the-end row repeats
  }
  float acc[M][kFeaturesPerWarp];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int j = 0; j < kFeaturesPerWarp; ++j) acc[m][j] = 0.0f;

  // kUnroll slices of 256 columns a time: all their weight loads are issued before any is used,
  // so each lane keeps kUnroll * kFeaturesPerWarp 16-byte loads in flight.
  for (int base = lane * 8; base < k; base += kUnroll * 32 * 8) {
    uint4 raw[kUnroll][kFeaturesPerWarp];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int kk = base + u * 32 * 8;
#pragma unroll
      for (int j = 0; j < kFeaturesPerWarp; ++j) {
        raw[u][j] = kk < k ? __ldcs(reinterpret_cast<const uint4*>(rows[j] + kk)) : uint4{};
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int kk = base + u * 32 * 8;
      if (kk >= k) break;
      float wf[kFeaturesPerWarp][8];
#pragma unroll
      for (int j = 0; j < kFeaturesPerWarp; ++j) Unpack8(raw[u][j], wf[j]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        Unpack8(__ldg(reinterpret_cast<const uint4*>(x + static_cast<size_t>(m) * k + kk)), xf);
#pragma unroll
        for (int j = 0; j < kFeaturesPerWarp; ++j)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[m][j] = fmaf(xf[e], wf[j][e], acc[m][j]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int j = 0; j < kFeaturesPerWarp; ++j) acc[m][j] = WarpSum(acc[m][j]);
  if (lane != 0) return;
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int j = 0; j < kFeaturesPerWarp; ++j) {
      if (n0 + j >= n) continue;
      const size_t i = static_cast<size_t>(m) * n + n0 + j;
      if constexpr (kBf16Out) {
        static_cast<bf16*>(y)[i] = __float2bfloat16(acc[m][j]);
      } else {
        float* yf = static_cast<float*>(y);
        yf[i] = accumulate ? yf[i] + acc[m][j] : acc[m][j];
      }
    }
}

// One row of x (a decode step of one sequence): the block's kSplitWarps warps share
// kSplitFeatures weight rows and stride through k together, so a short row (k = 4096: 8 KiB)
// still has kSplitWarps * 32 lanes' loads in flight, and the warps' sums meet in shared memory.
// For one row this is ahead of a warp a weight row, which leads from a few rows up
// (docs/benchmarks.md, CUDA engine).
constexpr int kSplitWarps = 8;
constexpr int kSplitFeatures = 2;
constexpr int kSplitUnroll = 2;

template <bool kBf16Out>
__global__ void __launch_bounds__(kSplitWarps * 32)
    SplitKGemvKernel(const bf16* __restrict__ x, int k, const bf16* __restrict__ w, int n,
                     void* __restrict__ y, bool accumulate) {
  __shared__ float partial[kSplitWarps][kSplitFeatures];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = blockIdx.x * kSplitFeatures;
  const bf16* rows[kSplitFeatures];
#pragma unroll
  for (int j = 0; j < kSplitFeatures; ++j) {
    rows[j] = w + static_cast<size_t>(min(n0 + j, n - 1)) * k;  // a past-the-end row repeats
  }
  float acc[kSplitFeatures] = {};
  constexpr int kStride = kSplitWarps * 32 * 8;  // columns the block covers in one slice
  for (int base = threadIdx.x * 8; base < k; base += kSplitUnroll * kStride) {
    uint4 raw[kSplitUnroll][kSplitFeatures];
#pragma unroll
    for (int u = 0; u < kSplitUnroll; ++u) {
      const int kk = base + u * kStride;
#pragma unroll
      for (int j = 0; j < kSplitFeatures; ++j) {
        raw[u][j] = kk < k ? __ldcs(reinterpret_cast<const uint4*>(rows[j] + kk)) : uint4{};
      }
    }
#pragma unroll
    for (int u = 0; u < kSplitUnroll; ++u) {
      const int kk = base + u * kStride;
      if (kk >= k) break;
      float xf[8];
      Unpack8(__ldg(reinterpret_cast<const uint4*>(x + kk)), xf);
#pragma unroll
      for (int j = 0; j < kSplitFeatures; ++j) {
        float wf[8];
        Unpack8(raw[u][j], wf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[j] = fmaf(xf[e], wf[e], acc[j]);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kSplitFeatures; ++j) {
    const float v = WarpSum(acc[j]);
    if (lane == 0) partial[warp][j] = v;
  }
  __syncthreads();
  if (threadIdx.x >= kSplitFeatures || n0 + threadIdx.x >= n) return;
  float sum = 0.0f;
#pragma unroll
  for (int q = 0; q < kSplitWarps; ++q) sum += partial[q][threadIdx.x];
  const int i = n0 + threadIdx.x;
  if constexpr (kBf16Out) {
    static_cast<bf16*>(y)[i] = __float2bfloat16(sum);
  } else {
    float* yf = static_cast<float*>(y);
    yf[i] = accumulate ? yf[i] + sum : sum;
  }
}

template <int M>
void Launch(const bf16* x, int k, const bf16* w, int n, void* y, bool y_bf16, bool accumulate,
            cudaStream_t stream) {
  const int per_block = kWarpsPerBlock * kFeaturesPerWarp;
  const unsigned blocks = static_cast<unsigned>((n + per_block - 1) / per_block);
  if (y_bf16) {
    SkinnyGemmKernel<M, true><<<blocks, kThreads, 0, stream>>>(x, k, w, n, y, false);
  } else {
    SkinnyGemmKernel<M, false><<<blocks, kThreads, 0, stream>>>(x, k, w, n, y, accumulate);
  }
}

}  // namespace

cudaError_t LaunchSkinnyGemm(const bf16* x, int rows, int k, const bf16* w, int n, void* y,
                             bool y_bf16, bool accumulate, cudaStream_t stream) {
  if (rows < 1 || rows > kSkinnyGemmMaxRows || k % 8 != 0 || (y_bf16 && accumulate)) {
    return cudaErrorInvalidValue;
  }
  if (n <= 0) return cudaGetLastError();
  if (rows == 1) {
    const unsigned blocks = static_cast<unsigned>((n + kSplitFeatures - 1) / kSplitFeatures);
    if (y_bf16) {
      SplitKGemvKernel<true><<<blocks, kSplitWarps * 32, 0, stream>>>(x, k, w, n, y, false);
    } else {
      SplitKGemvKernel<false><<<blocks, kSplitWarps * 32, 0, stream>>>(x, k, w, n, y, accumulate);
    }
    return cudaGetLastError();
  }
  using LaunchFn = void (*)(const bf16*, int, const bf16*, int, void*, bool, bool, cudaStream_t);
  constexpr LaunchFn kByRows[kSkinnyGemmMaxRows] = {Launch<1>, Launch<2>, Launch<3>, Launch<4>,
                                                    Launch<5>, Launch<6>, Launch<7>, Launch<8>};
  kByRows[rows - 1](x, k, w, n, y, y_bf16, accumulate, stream);
  return cudaGetLastError();
}

}  // namespace pdserve::model::cuda
