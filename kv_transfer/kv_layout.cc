#include "kv_transfer/kv_layout.h"

#include <openssl/sha.h>

#include <fmt/format.h>

namespace pdserve::kv_transfer {

Result<KvLayout> KvLayout::Make(std::string model_id, model::DType dtype, int n_layers,
                                int n_kv_heads, int head_dim, int page_size) {
  if (model_id.empty()) return InvalidArgument("KV layout: empty model id");
  if (n_layers <= 0 || n_kv_heads <= 0 || head_dim <= 0 || page_size <= 0) {
    return InvalidArgument(fmt::format(
        "KV layout: layers ({}), kv heads ({}), head dim ({}) and page size ({}) must be positive",
        n_layers, n_kv_heads, head_dim, page_size));
  }
  if (n_layers > 4096 || n_kv_heads > 4096 || head_dim > 65536 || page_size > 65536) {
    return OutOfRange("KV layout: a dimension is implausibly large");
  }
  KvLayout l;
  l.model_id = std::move(model_id);
  l.dtype = dtype;
  l.n_layers = n_layers;
  l.n_kv_heads = n_kv_heads;
  l.head_dim = head_dim;
  l.page_size = page_size;
  l.hash = ComputeLayoutHash(l);
  return l;
}

Result<KvLayout> KvLayout::FromConfig(const model::ModelConfig& config, int page_size) {
  return FromConfig(config, page_size, config.dtype);
}

Result<KvLayout> KvLayout::FromConfig(const model::ModelConfig& config, int page_size,
                                      model::DType kv_dtype) {
  return Make(config.model_id, kv_dtype, config.n_layers, config.n_kv_heads, config.head_dim,
              page_size);
}

model::KvCacheShape KvLayout::Shape(int num_pages) const {
  model::KvCacheShape s;
  s.n_layers = n_layers;
  s.num_pages = num_pages;
  s.page_size = page_size;
  s.n_kv_heads = n_kv_heads;
  s.head_dim = head_dim;
  s.dtype = dtype;
  return s;
}

std::string KvLayout::ToString() const { return fmt::format("{} #{:016x}", Shape(), hash); }

std::string KvLayout::Shape() const {
  return fmt::format("{} {} L{} H{}x{} P{} v{}", model_id, model::DTypeName(dtype), n_layers,
                     n_kv_heads, head_dim, page_size, version);
}

uint64_t ComputeLayoutHash(const KvLayout& layout) {
  // Canonical text: field names and decimal values, so the digest does not depend on struct
  // padding, endianness or enum numbering.
  const std::string canonical = fmt::format(
      "pdserve-kv-layout\nversion={}\nmodel_id={}\ndtype={}\nn_layers={}\nn_kv_heads={}\n"
      "head_dim={}\npage_size={}\n",
      layout.version, layout.model_id, model::DTypeName(layout.dtype), layout.n_layers,
      layout.n_kv_heads, layout.head_dim, layout.page_size);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(canonical.data()), canonical.size(), digest);
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h = (h << 8) | digest[i];
  return h;
}

}  // namespace pdserve::kv_transfer
