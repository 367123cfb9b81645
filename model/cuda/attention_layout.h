// How the paged attention kernel (attention.cu) splits a step's work, shared by the host-side
// planner (step_plan.h) and the kernels. Plain C++17 with no CUDA types, so both g++ and nvcc
// read it. One block of the kernel is one AttentionItem for one "head tile" (up to
// heads_per_tile query heads sharing one KV head): it attends rows row0..row0+n_rows-1 (tokens of
// one sequence at positions pos0..) to the keys [key_begin, key_end) of that sequence.
#pragma once

#include <cstdint>

namespace pdserve::model::cuda {

inline constexpr int kAttentionWarps = 4;  // warps per attention block; each takes 32 keys a time

// Query rows (token x head pairs) one block holds in registers: 16, or 8 for heads above 128.
inline constexpr int AttentionMaxRows(int head_dim) { return head_dim > 128 ? 8 : 16; }

struct AttentionItem {
  int32_t row0;       // first row of the query tile in the step's rows
  int32_t n_rows;     // tokens in the tile, consecutive positions of one sequence
  int32_t pos0;       // position of row0
  int32_t table;      // offset of the sequence's block table in the step's tables
  int32_t key_begin;  // keys of this split; causal masking still applies per row
  int32_t key_end;
  int32_t partial;       // -1: the tile has one split and writes its output; else its partial slot
  int32_t combine = -1;  // with partial >= 0: the index of the tile's AttentionCombine
};

// A query tile whose keys were split over several items: the combine kernel merges the partial
// results of slots first_partial..first_partial+n_splits-1.
struct AttentionCombine {
  int32_t row0;
  int32_t n_rows;
  int32_t first_partial;
  int32_t n_splits;
};

}  // namespace pdserve::model::cuda
