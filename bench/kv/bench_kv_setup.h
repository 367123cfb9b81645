// What both ends of `pdserve bench kv` share (bench_kv_command.cc drives the messages,
// bench_kv_receiver.cc receives them): the options, the layout of the messages, the pool memory
// they move between, and the process CPU clock each side reads around them. Any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "kv_transfer/kv_layout.h"
#include "kv_transfer/tcp_transport.h"

namespace pdserve::bench {

struct BenchKvOptions {
  std::string transport = "tcp";
  uint64_t min_bytes = 64ull << 10;
  uint64_t max_bytes = 1ull << 30;
  int iters = 21;    // paired ratios are noisy on shared machines: a median of many is steady
  std::string peer;  // HOST:PORT of a `--listen` process
  int listen = -1;   // control port to serve on
  std::string json_path;
  int device = 0;
  size_t chunk_bytes = kv_transfer::TcpTransportOptions{}.max_chunk_bytes;
  size_t lead_chunk_bytes = kv_transfer::TcpTransportOptions{}.lead_chunk_bytes;
  std::string congestion = "auto";  // KV and baseline sockets alike
  bool pin = true;                  // loopback: the two processes on different CPUs
  // TCP: also time a plain socket whose two ends checksum the bytes as the KV wire format does.
  bool checksummed_baseline = false;
  // TCP: messages of at least this many bytes go into the socket by reference, smaller ones by
  // copy (TcpTransportOptions::splice_min_layer_bytes; kv_transfer::kNeverSplice: all by copy).
  size_t splice_min_bytes = kv_transfer::TcpTransportOptions{}.splice_min_layer_bytes;
  size_t splice_max_bytes =
      kv_transfer::TcpTransportOptions{}.splice_max_layer_bytes;  // and at most
  // TCP: both ends check CRCs on more than one thread where they may run on two CPUs or more:
  // the receiver on its worker pool beside its I/O thread
  // (TcpKvListenerOptions::offload_tcp_checksums), the sender on a pool beside its writing thread
  // (TcpTransportOptions::offload_checksums).
  bool offload_checksums = false;
};

// 64 KiB pages: bf16, 16 tokens, 8 KV heads of 128 (a Llama-3-8B page), one layer.
kv_transfer::KvLayout BenchLayout();

// The checksummed baseline sends and checks its bytes in pieces of this size.
inline constexpr uint64_t kChecksumPiece = 1 << 20;

// CPU time of this process, all its threads, in seconds: a KV message's or a baseline's CPU cost
// on each side is the difference around it (the transports' I/O threads included).
double ProcessCpuSeconds();

std::string HostName();

// KV pool memory: host memory for TCP, device memory for the GPU paths.
struct BenchPool {
  // TCP: huge pages, as the CPU engine holds its KV cache (cpu_backend.cc): a splicing
  // receiver's CPU per MiB depends on them (docs/benchmarks.md, Splice against copy).
  std::shared_ptr<void> host_memory;
  void* device = nullptr;
  int device_id = 0;
  unsigned char* host() const { return static_cast<unsigned char*>(host_memory.get()); }
  void* base() const { return device ? device : host(); }
  BenchPool() = default;
  BenchPool(const BenchPool&) = delete;
  BenchPool& operator=(const BenchPool&) = delete;
  ~BenchPool();
};

// Fills `pool` with `bytes` of random data (TCP), or allocates them on the GPU (o.device).
Status MakePool(const BenchKvOptions& o, size_t bytes, BenchPool* pool);

}  // namespace pdserve::bench
