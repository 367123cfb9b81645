#include "model/cuda/step_plan.h"

#include <algorithm>
#include <string>

namespace pdserve::model::cuda {
namespace {

// Refuses a chunk the backend cannot run; `end` is one past its last position.
Status CheckChunk(const SequenceChunk& c, int end, const ModelConfig& config,
                  const KvCacheShape& shape) {
  if (c.tokens.empty()) return InvalidArgument("a sequence chunk has no tokens");
  if (c.start_pos < 0 || end > config.max_seq_len) {
    return OutOfRange("positions up to " + std::to_string(end) + " exceed the context of " +
                      std::to_string(config.max_seq_len) + " tokens");
  }
  const int pages_needed = PagesForTokens(end, shape.page_size);
  if (static_cast<int>(c.pages.size()) < pages_needed) {
    return InvalidArgument("block table of " + std::to_string(c.pages.size()) +
                           " pages does not cover " + std::to_string(end) + " tokens");
  }
  // Every page of the table, as the CPU backend checks, though only the first pages_needed
  // are read this step.
  const auto bad_page = std::find_if(c.pages.begin(), c.pages.end(),
                                     [&](int32_t p) { return p < 0 || p >= shape.num_pages; });
  if (bad_page != c.pages.end()) {
    return InvalidArgument("page id " + std::to_string(*bad_page) + " is outside the pool");
  }
  const auto bad_token = std::find_if(c.tokens.begin(), c.tokens.end(),
                                      [&](int32_t t) { return t < 0 || t >= config.vocab_size; });
  if (bad_token != c.tokens.end()) {
    return InvalidArgument("token id " + std::to_string(*bad_token) +
                           " is outside the vocabulary of " + std::to_string(config.vocab_size));
  }
  return Status::Ok();
}

int CeilDiv(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace

int HeadTiling::grid_y() const { return n_kv_heads * head_tiles; }

HeadTiling TileHeads(const ModelConfig& config) {
  HeadTiling t;
  const int group = config.n_heads / config.n_kv_heads;
  t.n_kv_heads = config.n_kv_heads;
  t.max_rows = AttentionMaxRows(config.head_dim);
  t.heads_per_tile = std::min(group, t.max_rows);
  t.head_tiles = CeilDiv(group, t.heads_per_tile);
  t.tokens_per_tile = t.max_rows / t.heads_per_tile;
  return t;
}

Status BuildStepPlan(const ForwardBatch& batch, const ModelConfig& config,
                     const KvCacheShape& shape, const StepPlanOptions& options, StepPlan* plan) {
  plan->tokens.clear();
  plan->positions.clear();
  plan->row_table.clear();
  plan->tables.clear();
  plan->logit_rows.clear();
  plan->items.clear();
  plan->combine.clear();
  plan->num_partials = 0;
  plan->max_item_tokens = 0;

  const HeadTiling tiling = TileHeads(config);
  struct Tile {
    int row0, n_rows, pos0, table;
  };
  std::vector<Tile> tiles;
  for (const SequenceChunk& c : batch.chunks) {
    const int n = static_cast<int>(c.tokens.size());
    const int end = c.start_pos + n;
    PDSERVE_RETURN_IF_ERROR(CheckChunk(c, end, config, shape));
    const int row0 = static_cast<int>(plan->tokens.size());
    const int table = static_cast<int>(plan->tables.size());
    plan->tables.insert(plan->tables.end(), c.pages.begin(),
                        c.pages.begin() + PagesForTokens(end, shape.page_size));
    for (int i = 0; i < n; ++i) {
      plan->tokens.push_back(c.tokens[i]);
      plan->positions.push_back(c.start_pos + i);
      plan->row_table.push_back(table);
      if (batch.HasLogitRow(c, i)) plan->logit_rows.push_back(row0 + i);
    }
    for (int t = 0; t < n; t += tiling.tokens_per_tile) {
      tiles.push_back({row0 + t, std::min(tiling.tokens_per_tile, n - t), c.start_pos + t, table});
    }
  }
  plan->num_rows = static_cast<int>(plan->tokens.size());

  // Split key ranges only when the tiles alone leave the GPU idle.
  const int64_t blocks = static_cast<int64_t>(tiles.size()) * tiling.grid_y();
  const int want_splits = blocks >= options.target_blocks
                              ? 1
                              : CeilDiv(options.target_blocks, std::max<int64_t>(1, blocks));
  for (const Tile& t : tiles) {
    plan->max_item_tokens = std::max(plan->max_item_tokens, t.n_rows);
    const int min_keys = std::max(
        32, t.n_rows == 1 ? options.min_keys_per_decode_split : options.min_keys_per_split);
    const int keys = t.pos0 + t.n_rows;  // causal: the last row sees keys 0..its position
    int splits = std::max(1, std::min(want_splits, CeilDiv(keys, min_keys)));
    const int per_split = CeilDiv(CeilDiv(keys, splits), 32) * 32;
    splits = CeilDiv(keys, per_split);
    if (splits == 1) {
      plan->items.push_back({t.row0, t.n_rows, t.pos0, t.table, 0, keys, -1});
      continue;
    }
    const auto combine = static_cast<int32_t>(plan->combine.size());
    plan->combine.push_back({t.row0, t.n_rows, plan->num_partials, splits});
    for (int s = 0; s < splits; ++s) {
      plan->items.push_back({t.row0, t.n_rows, t.pos0, t.table, s * per_split,
                             std::min(keys, (s + 1) * per_split), plan->num_partials++, combine});
    }
  }
  return Status::Ok();
}

}  // namespace pdserve::model::cuda
