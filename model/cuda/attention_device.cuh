// Device helpers shared by the attention kernels (attention.cu, decode_attention.cu): which
// query heads a block holds, and where a split's partial result lives. Device code only.
#pragma once

#include "model/cuda/kernels.h"

namespace pdserve::model::cuda {

inline constexpr float kNegInf = -__builtin_inff();

// Where block (item, blockIdx.y)'s rows are: row r is token r / n_heads_here of the tile and
// query head first_head + r % n_heads_here.
struct HeadTile {
  int kv_head;
  int first_head;
  int n_heads_here;
};

__device__ __forceinline__ HeadTile HeadTileOf(const AttentionArgs& a) {
  const int group = a.n_heads / a.n_kv_heads;
  const int g = blockIdx.y / a.head_tiles, t = blockIdx.y % a.head_tiles;
  return {g, g * group + t * a.heads_per_tile, min(a.heads_per_tile, group - t * a.heads_per_tile)};
}

__device__ __forceinline__ size_t PartialSlot(int partial, int r, int max_rows) {
  return (static_cast<size_t>(partial) * gridDim.y + blockIdx.y) * max_rows + r;
}

}  // namespace pdserve::model::cuda
