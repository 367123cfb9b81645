// KvLayout: what a prefill and a decode worker must agree on before KV bytes move between them
// (docs/architecture.md, "KV layout"): model id, KV dtype, layers, KV heads, head dim, page size
// and the layout version, and `hash`, a stable 64-bit digest of those fields. Two workers whose
// hashes differ refuse each other in the handshake and in every chunk header.
// An immutable value: built once, safe to read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "model/kv_pool.h"
#include "model/model_config.h"

namespace pdserve::kv_transfer {

// Bump when the meaning of the page layout changes
// ([num_pages][2][page_size][n_kv_heads][head_dim]).
inline constexpr uint32_t kKvLayoutVersion = 1;

struct KvLayout {
  std::string model_id;
  model::DType dtype = model::DType::kF32;
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int page_size = 16;
  uint32_t version = kKvLayoutVersion;
  uint64_t hash = 0;  // filled by Make/FromConfig; covers every field above

  // Validates the fields (all positive, model id non-empty) and computes `hash`.
  static Result<KvLayout> Make(std::string model_id, model::DType dtype, int n_layers,
                               int n_kv_heads, int head_dim, int page_size);
  // The KV dtype defaults to the model's dtype.
  static Result<KvLayout> FromConfig(const model::ModelConfig& config, int page_size);
  static Result<KvLayout> FromConfig(const model::ModelConfig& config, int page_size,
                                     model::DType kv_dtype);

  // One layer's K and V of one page, in bytes: a page is contiguous within its layer's pool.
  size_t page_bytes() const {
    return 2ull * page_size * n_kv_heads * head_dim * model::DTypeSize(dtype);
  }
  // The pool shape of `num_pages` pages in this layout.
  model::KvCacheShape Shape(int num_pages) const;
  // "model-id f16 L32 H8x128 P16 v1 #0123456789abcdef", for logs and errors.
  std::string ToString() const;
  // The same without the hash, for what a peer is told ("model-id f16 L32 H8x128 P16 v1").
  std::string Shape() const;
};

// SHA-256 of a canonical encoding of the fields, truncated to 64 bits: stable across builds,
// compilers and hosts.
uint64_t ComputeLayoutHash(const KvLayout& layout);

}  // namespace pdserve::kv_transfer
