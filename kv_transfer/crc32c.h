// CRC32C (Castagnoli, as in iSCSI and ext4) of KV chunk payloads and frame headers. Backed by
// Intel's ISA-L (crc32_iscsi), which picks its fastest kernel at run time (AVX-512 VPCLMULQDQ
// folding where present).
// Pure functions: safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pdserve::kv_transfer {

// CRC32C of n bytes; `crc` continues a previous value: Crc32c(b, Crc32c(a)) == CRC of a then b.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// The same value as Crc32c, for bytes that are likely not in cache (a KV chunk about to go out):
// read block by block while the next block is prefetched as kPrefetchStreams interleaved
// sequential streams. One core reading one stream from memory gets what its line fill buffers
// allow; the L2 streamer runs ahead of each of several streams (docs/benchmarks.md, Checksums).
uint32_t Crc32cFromMemory(const void* data, size_t n, uint32_t crc = 0);
// Its block: buffers up to this size go straight to Crc32c.
inline constexpr size_t kCrc32cFromMemoryBlock = 256 << 10;

// The CRC32C of a then b from Crc32c(a), Crc32c(b) and b's length, in O(log len_b): pieces of a
// buffer checked apart, on several threads, join into the buffer's CRC.
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

// A bit-at-a-time reference, slow and obviously right: for tests.
uint32_t Crc32cReference(const void* data, size_t n, uint32_t crc = 0);

}  // namespace pdserve::kv_transfer
