// The KV side channel's frames (docs/architecture.md, "Wire protocols"). Every frame is a fixed
// 80-byte little-endian header, protected by its own CRC32C, followed by `byte_count` payload
// bytes:
//   kHello      sender -> receiver, first frame: the sender's layout hash and payload path;
//               payload: path-specific set-up bytes (the NCCL unique id).
//   kHelloReply receiver -> sender: status; payload: an error message, or path-specific bytes
//               (CUDA IPC memory handles). A layout mismatch is refused here, before any KV byte.
//   kChunk      sender -> receiver: one run of pages of one layer of one request, with the
//               request's transfer secret; payload: the pages' bytes (TCP path) or nothing (the
//               bytes travel by NCCL / CUDA IPC).
//   kAck        receiver -> sender: the chunk (request, layer, first page, count) was applied,
//               or the status why not; payload: an error message.
//   kCancel     either way: the request failed or was cancelled (a sender's carries the
//               transfer secret); payload: a message.
// ParseHeader validates everything that does not need request state. Pure functions: safe from
// any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace pdserve::kv_transfer {

inline constexpr uint32_t kFrameMagic = 0x564b4450;  // "PDKV"
inline constexpr uint16_t kWireVersion = 2;          // 2: the transfer secret
inline constexpr size_t kHeaderBytes = 80;
// Payloads of frames other than chunks (messages, set-up bytes) are at most this long.
inline constexpr uint64_t kMaxControlPayload = 64 * 1024;

enum class FrameType : uint8_t { kHello = 1, kHelloReply = 2, kChunk = 3, kAck = 4, kCancel = 5 };

// How chunk bytes travel: inside the TCP frame, or beside it on a GPU path.
enum class PayloadPath : uint8_t { kTcp = 0, kNccl = 1, kCudaIpc = 2 };

// A reservation's transfer secret: random, issued by the decode worker in Reserved and carried
// by every chunk and cancel a sender sends for that reservation, so that only the prefill worker
// the gateway named can write into or cancel it.
inline constexpr size_t kTransferSecretBytes = 16;
using TransferSecret = std::array<unsigned char, kTransferSecretBytes>;

struct FrameHeader {
  FrameType type = FrameType::kChunk;
  PayloadPath path = PayloadPath::kTcp;
  uint64_t request_id = 0;
  uint64_t layout_hash = 0;
  uint32_t layer = 0;
  int32_t first_page = 0;  // destination page id (chunks and acks)
  uint32_t page_count = 0;
  StatusCode status = StatusCode::kOk;  // acks, hello replies and cancels
  uint64_t byte_count = 0;              // payload bytes that follow this header
  uint32_t payload_crc = 0;             // CRC32C of the payload (TCP chunks; 0 otherwise)
  TransferSecret secret{};              // chunks and a sender's cancels; zero otherwise
};

using HeaderBytes = std::array<unsigned char, kHeaderBytes>;

HeaderBytes EncodeHeader(const FrameHeader& h);
// Checks magic, version, header CRC, type, path and status codes, and the size limits that do
// not depend on the layout; anything else is the caller's to check against its state.
Result<FrameHeader> ParseHeader(const HeaderBytes& bytes);

std::string_view FrameTypeName(FrameType t);
std::string_view PayloadPathName(PayloadPath p);

}  // namespace pdserve::kv_transfer
