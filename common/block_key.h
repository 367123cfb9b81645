// Block keys of the prefix cache: a full page of a prompt (page_size tokens) is named by a hash
// chain, so that equal keys mean equal KV. A page's key covers its parent's key (the page before
// it; 0 for the first), the KV identity `salt` (the workers' layout hash: model, KV dtype, layers,
// heads, head dim, page size and layout version) and the page's token ids. Two prompts share a
// page's key only when they share every token up to the end of that page and their KV is laid out
// alike. The gateway (routing) and the workers (their caches and KV events) compute the same keys
// through these functions; tests/common/block_key_test.cc holds known values.
// Pure functions: safe from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pdserve {

using BlockKey = uint64_t;

// SHA-256 over (parent, salt, tokens) in little-endian bytes, truncated to its first 8 bytes
// (read little-endian). Never returns 0, which stands for "no parent".
BlockKey ChainBlockKey(BlockKey parent, uint64_t salt, std::span<const int32_t> page_tokens);

// The keys of the full pages of `tokens`, in order: tokens.size() / page_size keys (a partial
// last page has none). page_size must be positive.
std::vector<BlockKey> PromptBlockKeys(uint64_t salt, std::span<const int32_t> tokens,
                                      int page_size);

// Appends to `keys` the keys of the full pages of `tokens` that `keys` does not cover yet
// (keys.size() pages are taken as done): what a sequence that grows calls after each page fills.
void ExtendBlockKeys(std::vector<BlockKey>& keys, uint64_t salt, std::span<const int32_t> tokens,
                     int page_size);

}  // namespace pdserve
