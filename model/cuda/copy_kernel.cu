// The copy kernel of kernels.h (LaunchCopyTiles): a block per tile, 256 threads, each keeping
// four 16-byte loads in flight before it stores them.
#include "model/cuda/kernels.h"

namespace pdserve::model::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kLoads = 4;

__global__ void __launch_bounds__(kThreads) CopyTilesKernel(const CopyTile* tiles) {
  const CopyTile t = tiles[blockIdx.x];
  if (t.aligned16) {
    const uint4* src = reinterpret_cast<const uint4*>(t.src);
    uint4* dst = reinterpret_cast<uint4*>(t.dst);
    const int n = static_cast<int>(t.bytes / 16);
    for (int i0 = threadIdx.x; i0 < n; i0 += kLoads * kThreads) {
      uint4 v[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int i = i0 + u * kThreads;
        if (i < n) v[u] = src[i];
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int i = i0 + u * kThreads;
        if (i < n) dst[i] = v[u];
      }
    }
    return;
  }
  const unsigned char* src = reinterpret_cast<const unsigned char*>(t.src);
  unsigned char* dst = reinterpret_cast<unsigned char*>(t.dst);
  for (uint32_t i = threadIdx.x; i < t.bytes; i += kThreads) dst[i] = src[i];
}

}  // namespace

cudaError_t LaunchCopyTiles(const CopyTile* tiles, int n_tiles, cudaStream_t stream) {
  if (n_tiles <= 0) return cudaGetLastError();
  CopyTilesKernel<<<n_tiles, kThreads, 0, stream>>>(tiles);
  return cudaGetLastError();
}

}  // namespace pdserve::model::cuda
