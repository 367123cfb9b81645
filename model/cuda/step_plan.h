// StepPlan: what the CUDA backend uploads for one Forward, built on the host from a
// ForwardBatch. Rows are the batch's tokens in chunk order; each row knows its token, position
// and block table; attention work is cut into AttentionItems (attention_layout.h) with long key
// ranges split so that a step with few sequences still fills the GPU (flash-decoding).
// BuildStepPlan also checks the batch: the same refusals as the CPU backend, so a bad request
// fails before any device work. Plain C++ (no CUDA), so its tests run on any machine. Pure
// function of its inputs; a StepPlan is reused step after step by its one owner.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "model/backend.h"
#include "model/cuda/attention_layout.h"
#include "model/kv_pool.h"
#include "model/model_config.h"

namespace pdserve::model::cuda {

struct StepPlanOptions {
  // Blocks the attention kernel should have at least; below that, key ranges are split.
  // 0: never split. The backend uses 4 per multiprocessor.
  int target_blocks = 0;
  int min_keys_per_split = 256;  // a split of a prompt tile is never shorter than this (>= 32)
  // Likewise for a one-token tile (a decode row, or a prompt chunk's last token when tiles hold
  // one token), whose work per key is a few rows': unsplit, a short decode range leaves too few
  // blocks busy (docs/benchmarks.md, CUDA engine).
  int min_keys_per_decode_split = 32;
};

// How query heads map onto attention blocks for a model (see AttentionArgs in kernels.h).
struct HeadTiling {
  int heads_per_tile = 1;   // query heads of one KV head in a block: min(group, max rows)
  int head_tiles = 1;       // blocks per KV head
  int tokens_per_tile = 1;  // rows of a query tile: max rows / heads_per_tile
  int max_rows = 1;         // AttentionMaxRows(head_dim)
  int grid_y() const;
  int n_kv_heads = 1;
};
HeadTiling TileHeads(const ModelConfig& config);

struct StepPlan {
  int num_rows = 0;
  std::vector<int32_t> tokens;      // [num_rows]
  std::vector<int32_t> positions;   // [num_rows]
  std::vector<int32_t> row_table;   // [num_rows]: offset of the row's block table in `tables`
  std::vector<int32_t> tables;      // each chunk's pages, as many as its last position needs
  std::vector<int32_t> logit_rows;  // rows whose logits are returned, in order
  std::vector<AttentionItem> items;
  std::vector<AttentionCombine> combine;
  int num_partials = 0;     // partial slots the items use
  int max_item_tokens = 0;  // the most tokens any item holds (1 in a decode-only step)
};

// Fills `plan` (reusing its storage). InvalidArgument/OutOfRange as CpuBackend refuses: empty
// chunks, token ids outside the vocabulary, positions past the context, block tables that do
// not cover the chunk, page ids outside the pool.
Status BuildStepPlan(const ForwardBatch& batch, const ModelConfig& config,
                     const KvCacheShape& shape, const StepPlanOptions& options, StepPlan* plan);

}  // namespace pdserve::model::cuda
