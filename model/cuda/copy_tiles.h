// How a batch of device-to-device byte copies is cut into tiles, one per block of the copy
// kernel (kernels.h, LaunchCopyTiles). KV transfer's CUDA-IPC sender copies a layer of many runs
// of pages with one launch of that kernel instead of a cudaMemcpyAsync call a run. Plain C++17
// (nvcc reads it too) with no CUDA types (addresses are integers), so the tiling is tested on any
// machine. Pure function.
#pragma once

#include <cstdint>
#include <vector>

namespace pdserve::model::cuda {

// One copy of `bytes` bytes between device addresses; ranges of a batch must not overlap.
struct CopyRange {
  uint64_t src = 0;
  uint64_t dst = 0;
  uint64_t bytes = 0;
};

// A block's share: `bytes` bytes from src to dst, moved 16 bytes a load when `aligned16`
// (src, dst and bytes all multiples of 16), else a byte a load.
struct CopyTile {
  uint64_t src = 0;
  uint64_t dst = 0;
  uint32_t bytes = 0;
  uint32_t aligned16 = 0;
};

inline constexpr uint32_t kCopyTileBytes = 256u << 10;

// Appends to `tiles` pieces of at most `tile_bytes` (a multiple of 16, at least 16) that
// together cover every range once, in order. A range whose src and dst are 16-byte aligned
// gets aligned tiles for its body and one byte tile for a tail under 16 bytes.
void AppendCopyTiles(const std::vector<CopyRange>& ranges, uint32_t tile_bytes,
                     std::vector<CopyTile>* tiles);

}  // namespace pdserve::model::cuda
