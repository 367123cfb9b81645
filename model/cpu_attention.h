// The CPU backend's attention kernel: one token's query heads over that token's keys and values,
// rows of the paged KV pool passed as pointers in position order. A call covers a range of KV
// heads: all of them when there are enough tokens to keep every thread busy, so each key and
// value row (all heads, contiguous in a page) is read from memory once, front to back; or one at
// a time for a small batch. Keys are scored 8 at a time, the softmax uses a vectorised exp, and
// values are summed 8 keys at a time. Every sum runs in an order that depends only on the
// token's own data (never on the head range, the batch or the thread), so a token's output is
// the same bits in a prompt chunk or a decode step, alone or batched, and on AVX2 and AVX-512
// machines alike (the AVX-512 path scores three query heads of a KV head per pass over the keys
// and sums values 16 columns to a register over all the keys, each element in the AVX2 path's
// order). Stateless and thread-safe; `scratch` is the caller's.
#pragma once

#include <cstddef>
#include <span>

namespace pdserve::model {

// Memory that a later call will read: the next token's key and value rows.
struct MemoryRegion {
  const void* data;
  size_t bytes;
};

struct AttentionRow {
  const float* q;              // all query heads of the token, head_dim floats each
  const float* const* keys;    // count key rows: kv_heads * head_dim floats each
  const float* const* values;  // count value rows, likewise
  int count;                   // positions attended: 1..pos+1
  int kv_head_begin;           // the KV heads this call covers, [begin, end)
  int kv_head_end;
  int group;     // query heads per KV head (GQA): query head h uses KV head h / group
  int head_dim;  //
  float scale;   // 1/sqrt(head_dim)
  // Read into cache a few lines at a time from inside this call's inner loops, so that the next
  // call finds its rows there: their first 512 KB, over the call's last slots (sooner, a long
  // context's own rows would push them out again). A decode step's keys and values come from
  // memory, row after row: fetched this way, in step with the arithmetic, they stall it less.
  std::span<const MemoryRegion> prefetch = {};
};

// Floats of scratch AttendRow needs.
size_t AttentionScratchFloats(const AttentionRow& a);

// Writes the covered query heads' outputs into out (indexed like q: head h at h * head_dim).
void AttendRow(const AttentionRow& a, float* scratch, float* out);

// Reads `regions` into cache with independent loads, many misses in flight at once: for rows
// that no earlier call prefetched (a thread's first token of a step).
void WarmRegions(std::span<const MemoryRegion> regions);

}  // namespace pdserve::model
