#include "kv_transfer/wire.h"

#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "kv_transfer/crc32c.h"

namespace pdserve::kv_transfer {
namespace {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

// Byte offsets within the 80-byte header (68..75 are zero).
constexpr size_t kOffMagic = 0, kOffVersion = 4, kOffType = 6, kOffPath = 7, kOffRequest = 8,
                 kOffHash = 16, kOffLayer = 24, kOffFirst = 28, kOffCount = 32, kOffStatus = 36,
                 kOffBytes = 40, kOffPayloadCrc = 48, kOffSecret = 52, kOffHeaderCrc = 76;
static_assert(kOffSecret + kTransferSecretBytes <= kOffHeaderCrc);
static_assert(kOffHeaderCrc + 4 == kHeaderBytes);

template <typename T>
void Put(HeaderBytes& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}
template <typename T>
T Get(const HeaderBytes& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

}  // namespace

HeaderBytes EncodeHeader(const FrameHeader& h) {
  HeaderBytes b{};
  Put<uint32_t>(b, kOffMagic, kFrameMagic);
  Put<uint16_t>(b, kOffVersion, kWireVersion);
  Put<uint8_t>(b, kOffType, static_cast<uint8_t>(h.type));
  Put<uint8_t>(b, kOffPath, static_cast<uint8_t>(h.path));
  Put<uint64_t>(b, kOffRequest, h.request_id);
  Put<uint64_t>(b, kOffHash, h.layout_hash);
  Put<uint32_t>(b, kOffLayer, h.layer);
  Put<int32_t>(b, kOffFirst, h.first_page);
  Put<uint32_t>(b, kOffCount, h.page_count);
  Put<uint32_t>(b, kOffStatus, static_cast<uint32_t>(h.status));
  Put<uint64_t>(b, kOffBytes, h.byte_count);
  Put<uint32_t>(b, kOffPayloadCrc, h.payload_crc);
  std::memcpy(b.data() + kOffSecret, h.secret.data(), kTransferSecretBytes);
  Put<uint32_t>(b, kOffHeaderCrc, Crc32c(b.data(), kOffHeaderCrc));
  return b;
}

Result<FrameHeader> ParseHeader(const HeaderBytes& b) {
  if (Get<uint32_t>(b, kOffMagic) != kFrameMagic) {
    return InvalidArgument("KV frame: bad magic (not a pdserve KV peer?)");
  }
  if (Get<uint16_t>(b, kOffVersion) != kWireVersion) {
    return InvalidArgument(fmt::format("KV frame: wire version {}, this build speaks {}",
                                       Get<uint16_t>(b, kOffVersion), kWireVersion));
  }
  if (Get<uint32_t>(b, kOffHeaderCrc) != Crc32c(b.data(), kOffHeaderCrc)) {
    return DataLoss("KV frame: header CRC mismatch");
  }
  FrameHeader h;
  const uint8_t type = Get<uint8_t>(b, kOffType);
  if (type < 1 || type > 5) return InvalidArgument(fmt::format("KV frame: unknown type {}", type));
  h.type = static_cast<FrameType>(type);
  const uint8_t path = Get<uint8_t>(b, kOffPath);
  if (path > 2) return InvalidArgument(fmt::format("KV frame: unknown payload path {}", path));
  h.path = static_cast<PayloadPath>(path);
  h.request_id = Get<uint64_t>(b, kOffRequest);
  h.layout_hash = Get<uint64_t>(b, kOffHash);
  h.layer = Get<uint32_t>(b, kOffLayer);
  h.first_page = Get<int32_t>(b, kOffFirst);
  h.page_count = Get<uint32_t>(b, kOffCount);
  const uint32_t status = Get<uint32_t>(b, kOffStatus);
  if (status > static_cast<uint32_t>(StatusCode::kInternal)) {
    return InvalidArgument(fmt::format("KV frame: unknown status code {}", status));
  }
  h.status = static_cast<StatusCode>(status);
  h.byte_count = Get<uint64_t>(b, kOffBytes);
  h.payload_crc = Get<uint32_t>(b, kOffPayloadCrc);
  std::memcpy(h.secret.data(), b.data() + kOffSecret, kTransferSecretBytes);
  if (h.type != FrameType::kChunk && h.byte_count > kMaxControlPayload) {
    return InvalidArgument(fmt::format("KV frame: {} payload of {} bytes (limit {})",
                                       FrameTypeName(h.type), h.byte_count, kMaxControlPayload));
  }
  return h;
}

std::string_view FrameTypeName(FrameType t) {
  switch (t) {
    case FrameType::kHello:
      return "hello";
    case FrameType::kHelloReply:
      return "hello-reply";
    case FrameType::kChunk:
      return "chunk";
    case FrameType::kAck:
      return "ack";
    case FrameType::kCancel:
      return "cancel";
  }
  return "?";
}

std::string_view PayloadPathName(PayloadPath p) {
  switch (p) {
    case PayloadPath::kTcp:
      return "tcp";
    case PayloadPath::kNccl:
      return "nccl";
    case PayloadPath::kCudaIpc:
      return "ipc";
  }
  return "?";
}

}  // namespace pdserve::kv_transfer
