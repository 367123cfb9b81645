// Fuzz target: KV frame headers (kv_transfer/wire.h), the first 80 bytes of every frame a KV peer
// sends. The input's first 80 bytes are parsed as they come, then again with the magic, version
// and header CRC made right, so that the checks behind the CRC are reached too. A header either
// parses, and encodes back to the same fields, or is refused with a Status.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kv_transfer/crc32c.h"
#include "kv_transfer/wire.h"

namespace {

using pdserve::kv_transfer::FrameHeader;
using pdserve::kv_transfer::HeaderBytes;

bool SameFields(const FrameHeader& a, const FrameHeader& b) {
  return a.type == b.type && a.path == b.path && a.request_id == b.request_id &&
         a.layout_hash == b.layout_hash && a.layer == b.layer && a.first_page == b.first_page &&
         a.page_count == b.page_count && a.status == b.status && a.byte_count == b.byte_count &&
         a.payload_crc == b.payload_crc && a.secret == b.secret;
}

void Check(const HeaderBytes& bytes) {
  auto parsed = pdserve::kv_transfer::ParseHeader(bytes);
  if (!parsed.ok()) return;
  const FrameHeader& h = *parsed;
  if (h.type != pdserve::kv_transfer::FrameType::kChunk &&
      h.byte_count > pdserve::kv_transfer::kMaxControlPayload) {
    abort();
  }
  (void)pdserve::kv_transfer::FrameTypeName(h.type);
  (void)pdserve::kv_transfer::PayloadPathName(h.path);
  auto again = pdserve::kv_transfer::ParseHeader(pdserve::kv_transfer::EncodeHeader(h));
  if (!again.ok() || !SameFields(h, *again)) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  HeaderBytes bytes{};
  std::memcpy(bytes.data(), data, std::min(size, bytes.size()));
  Check(bytes);
  // The same with what a peer that speaks the protocol gets right: magic, version, header CRC.
  const uint32_t magic = pdserve::kv_transfer::kFrameMagic;
  const uint16_t version = pdserve::kv_transfer::kWireVersion;
  std::memcpy(bytes.data(), &magic, sizeof magic);
  std::memcpy(bytes.data() + 4, &version, sizeof version);
  const uint32_t crc = pdserve::kv_transfer::Crc32c(bytes.data(), bytes.size() - 4);
  std::memcpy(bytes.data() + bytes.size() - 4, &crc, sizeof crc);
  Check(bytes);
  return 0;
}
