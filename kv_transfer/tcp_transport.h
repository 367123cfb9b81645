// The TCP side channel of the KV hand-over (docs/architecture.md, "Wire protocols"), on Boost.Asio.
// TcpTransport (prefill side) is one connection to one decode worker's TcpKvListener, shared by
// many requests. Chunks go straight from the KV pool into the socket, with no staging copy: big
// layer pushes by reference (vmsplice and splice, so not even a copy into the socket), small ones
// by sendmsg's copy. The listener reads them straight into the reserved pages, verifies the
// CRC32C as they land (on worker threads with offload_tcp_checksums) and only then acknowledges.
// With PayloadPath kNccl or kCudaIpc the same connection carries only headers and acks, and the
// bytes move on the GPU (device_payload.h). A lost connection fails every unfinished request on
// both sides. TcpTransport: all methods safe from any thread (see transport.h); one I/O thread
// inside. TcpKvListener: owns an I/O thread and a worker pool; its KvReceiver must outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/transport.h"
#include "kv_transfer/wire.h"

namespace pdserve::kv_transfer {

// TcpTransportOptions::splice_min_layer_bytes that copies every payload.
inline constexpr size_t kNeverSplice = SIZE_MAX;

struct TcpTransportOptions {
  std::string host = "127.0.0.1";  // the decode worker's KV endpoint
  uint16_t port = 0;               // required
  // Connect and handshake must finish within this.
  std::chrono::milliseconds connect_timeout{5000};
  // Of which the TCP connect gets at most this: a host that does not answer a SYN within it is
  // taken for gone (a prefill worker dials on its engine loop, which waits). The rest is the
  // hello's, where NCCL sets up its communicator. A name lookup is not bounded by either: it
  // runs on Asio's resolver thread, which a timeout cannot stop (KV endpoints are addresses).
  std::chrono::milliseconds dial_timeout{1000};
  // Runs longer than this are cut into several chunks (>= one page); each chunk is acked.
  size_t max_chunk_bytes = 2u << 20;
  // TCP: a layer's first chunk is at most this long and each next one at most twice the one
  // before, up to max_chunk_bytes, so the first byte leaves after a short checksum instead of a
  // full chunk's (SplitRuns). 0: every chunk max_chunk_bytes.
  size_t lead_chunk_bytes = 256u << 10;
  // TCP congestion control of the connection (tcp_congestion.h): "auto", "default" or a name.
  std::string congestion_control = "auto";
  PayloadPath path = PayloadPath::kTcp;
  // TCP: the payloads of layer pushes of at least this many bytes go into the socket by
  // reference, not by copy (payload_splicer.h); where the host refuses, the transport logs why
  // once and copies. 0: splice every push; kNeverSplice: copy every push (sendmsg). Splicing
  // leaves the sender only the checksum, and since the sender checksums from memory in streams
  // (Crc32cFromMemory) splicing is ahead of copying or level at every size: the default follows
  // the loopback measurements in docs/benchmarks.md (Splice against copy).
  size_t splice_min_layer_bytes = 0;
  // TCP: ... and at most this many: larger pushes are copied, as splicing falls behind copying
  // past this size (docs/benchmarks.md, Splice against copy).
  size_t splice_max_layer_bytes = 64u << 20;
  // CUDA IPC: a layer's runs of pages are cut into chunks of at most this many bytes; where
  // they average a MiB or more, each chunk's header leaves as soon as its copy is done while the
  // later ones still copy, so the receiver acks the first chunks during the copy instead of all
  // of them after it. Must be > 0. The default weighs the ack's wait against what smaller
  // pieces add to the copies (docs/benchmarks.md, CUDA IPC).
  size_t device_piece_bytes = 128u << 20;
  // TCP: compute each chunk's CRC on `checksum_threads` pool threads beside the writing thread
  // (ParallelCrc32c), where this process may run on two CPUs or more; otherwise the writing
  // thread alone reads the chunk for its CRC before sending it, which makes the sender the limit
  // where payloads are copied (docs/benchmarks.md, TCP loopback). Off until measured on a host
  // with cores to spare (scripts/gpu-check bench-tcp).
  bool offload_checksums = false;
  int checksum_threads = 3;
  int device = 0;  // CUDA device of the KV pools (GPU paths only)
  // Tests only: flip one payload bit of the chunk with this index (0-based, counted over the
  // connection) on the wire, after its CRC was computed. -1: never.
  int64_t flip_bit_in_chunk = -1;
};

class TcpTransport final : public Transport {
 public:
  // Connects and shakes hands; refused (FailedPrecondition) when the receiver's layout hash
  // differs. `layer_bases[l]`: layer l's pool of `num_pages` pages, read while sending.
  static Result<std::unique_ptr<TcpTransport>> Connect(const KvLayout& layout,
                                                       std::vector<const void*> layer_bases,
                                                       int num_pages, TcpTransportOptions options);
  ~TcpTransport() override;  // closes the connection; unfinished requests Fail (Unavailable)

  const KvLayout& layout() const override;
  Status Open(const OutgoingRequest& request) override;
  // TCP path: when no write is in progress, the calling thread checksums the layer's chunks and
  // writes them into the socket itself, as far as the socket buffer takes them without blocking
  // (a few MiB at most), and the I/O thread carries on with the rest: the first byte leaves with
  // no thread hand-off, and a prefill engine pushing layer by layer pays at most one socket
  // buffer's copy per layer.
  Status PushLayer(uint64_t request_id, int layer) override;
  Status Wait(uint64_t request_id) override;
  void Cancel(uint64_t request_id, std::string_view reason) override;
  std::optional<TransferState> State(uint64_t request_id) const override;
  bool connected() const override;

  class Impl;

 private:
  explicit TcpTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct TcpKvListenerOptions {
  std::string bind_address = "127.0.0.1";  // "0.0.0.0" to accept other hosts
  uint16_t port = 0;                       // 0: the OS picks; read it back with port()
  int verify_threads = 2;                  // the worker pool: GPU receives, TCP checksums
  // TCP: check payload CRCs on the worker pool beside the I/O thread, which then only copies out
  // of the socket (ChunkChecksum; a chunk's last span, up to about 512 KiB, is still checked on
  // the I/O thread), where this process may run on two CPUs or more; otherwise the I/O thread
  // checks each piece right after reading it. A chunk stays pinned until its spans are checked,
  // on a pool GPU receives share: a request whose deadline passes meanwhile closes the connection
  // (KvReceiver's abort of a stuck write). Off until measured on a host with cores to spare:
  // where the pool shares the sender's core, it slows pushes (docs/benchmarks.md, Checksums).
  bool offload_tcp_checksums = false;
  // A connection must send its hello within this.
  std::chrono::milliseconds handshake_timeout{5000};
  int device = 0;  // CUDA device of the receiver's pools (GPU paths only)
  // Where the receiver's pools are: host memory takes only the TCP path, GPU memory only the
  // GPU paths; a sender on the other kind is refused at its hello.
  bool pools_on_device = false;
  // TCP congestion control of accepted connections (tcp_congestion.h): "auto", "default" or a name.
  std::string congestion_control = "auto";
};

class TcpKvListener {
 public:
  static Result<std::unique_ptr<TcpKvListener>> Start(KvReceiver& receiver,
                                                      TcpKvListenerOptions options);
  ~TcpKvListener();  // closes every connection: their unfinished requests Fail

  uint16_t port() const;
  int connections() const;  // open connections

  class Impl;

 private:
  explicit TcpKvListener(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pdserve::kv_transfer
