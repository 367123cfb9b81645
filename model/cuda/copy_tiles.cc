#include "model/cuda/copy_tiles.h"

#include <algorithm>

namespace pdserve::model::cuda {

void AppendCopyTiles(const std::vector<CopyRange>& ranges, uint32_t tile_bytes,
                     std::vector<CopyTile>* tiles) {
  tile_bytes = std::max<uint32_t>(16, tile_bytes & ~15u);
  for (const CopyRange& r : ranges) {
    const bool aligned = r.src % 16 == 0 && r.dst % 16 == 0;
    const uint64_t body = aligned ? r.bytes & ~uint64_t{15} : r.bytes;
    for (uint64_t off = 0; off < body;) {
      const auto n = static_cast<uint32_t>(std::min<uint64_t>(tile_bytes, body - off));
      tiles->push_back({r.src + off, r.dst + off, n, aligned ? 1u : 0u});
      off += n;
    }
    if (body < r.bytes) {
      tiles->push_back({r.src + body, r.dst + body, static_cast<uint32_t>(r.bytes - body), 0u});
    }
  }
}

}  // namespace pdserve::model::cuda
