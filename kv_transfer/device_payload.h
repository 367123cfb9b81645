// The GPU payload paths of the KV side channel: chunk headers and acks travel over the TCP
// connection of TcpTransport / TcpKvListener, the bytes by NCCL (two GPUs, any hosts) or CUDA
// IPC (one GPU, two processes). Built only with PDSERVE_HAVE_CUDA (and PDSERVE_HAVE_NCCL for
// NCCL); otherwise the factories answer Unimplemented.
// A DevicePayloadSender is driven by one connection, in chunk order, under that connection's
// push lock; a DevicePayloadReceiver by one connection's ordered worker. Neither is thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kv_transfer/kv_layout.h"
#include "kv_transfer/transport.h"
#include "kv_transfer/wire.h"

namespace pdserve::kv_transfer {

// The path for KV pools on `device` ("cpu" or "cuda:N"): `name` is "auto" (tcp on the cpu, nccl
// on a GPU), "tcp", "nccl" or "ipc". Host pools only travel by TCP and GPU pools never do; a
// mismatch is refused with a message naming --kv-path.
Result<PayloadPath> ChoosePayloadPath(std::string_view name, std::string_view device);

// A KV pool's GPU as a peer describes it: its device ("cuda:0"), its machine (HostIdentity) and
// the GPU's UUID ("" where unknown: a worker of an older release).
struct GpuIdentity {
  std::string_view device, host_id, uuid;
};

// For "auto" on a GPU, once the receiver is known: CUDA IPC when it has the same GPU (NCCL cannot
// pair two ranks on one GPU), else NCCL. The same GPU is the same UUID where both have one (two
// containers of a node may each call their own GPU "cuda:0"); else the same device on the same
// machine. An unknown peer gets NCCL.
PayloadPath GpuPathTo(const GpuIdentity& self, const GpuIdentity& peer);

class DevicePayloadSender {
 public:
  virtual ~DevicePayloadSender() = default;
  // Bytes for the kHello payload (NCCL: the communicator's unique id).
  virtual Result<std::string> HelloPayload() = 0;
  // The receiver's kHelloReply payload (CUDA IPC: its pools' memory handles); NCCL joins the
  // communicator here. Bounded by `deadline`.
  virtual Status OnHelloReply(const std::string& payload, Clock::time_point deadline) = 0;
  // True: Send completes the copy before the chunk header is written (CUDA IPC writes straight
  // into the receiver's pages). False: Send is issued after the header (NCCL send/recv pair).
  virtual bool SendsBeforeHeader() const = 0;
  // Moves `bytes` from `src` (this process's device memory) to the receiver's pages starting
  // at `dst_first` of `layer`. Bounded by `deadline`. Where SendsBeforeHeader(), it may only
  // start the move: FlushInOrder completes the moves, and each chunk's header goes out after its
  // move is done.
  virtual Status Send(const void* src, int layer, int32_t dst_first, size_t bytes,
                      Clock::time_point deadline) = 0;
  // Completes every move started since the last flush, telling as it goes: calls ready(k) once
  // the moves of the first k Send()s (k ascending, n_sends of them in all) are done, from this
  // thread, so that their headers can go while later moves still run. Stops at the first error.
  // The default, for senders whose Send completes its move: ready(n_sends).
  virtual Status FlushInOrder(Clock::time_point /*deadline*/, size_t n_sends,
                              const std::function<void(size_t)>& ready) {
    ready(n_sends);
    return Status::Ok();
  }
};

class DevicePayloadReceiver {
 public:
  virtual ~DevicePayloadReceiver() = default;
  // Answers a kHello: returns the kHelloReply payload. Bounded by `deadline`.
  virtual Result<std::string> OnHello(const std::string& payload, Clock::time_point deadline) = 0;
  // True: a chunk is complete when its header arrives (CUDA IPC: the sender copied first), so
  // the connection acknowledges it at once, on its I/O thread, without Receive or Discard.
  virtual bool CompleteOnHeader() const { return false; }
  // Completes one chunk into `dst` (device memory of the receiver's pool). Bounded by deadline.
  virtual Status Receive(void* dst, size_t bytes, Clock::time_point deadline) = 0;
  // Consumes a refused chunk's bytes so the pair stays in step (NCCL); no-op for CUDA IPC.
  virtual Status Discard(size_t bytes, Clock::time_point deadline) = 0;
};

// `device`: the CUDA device of the sender's pools.
Result<std::unique_ptr<DevicePayloadSender>> MakeDevicePayloadSender(PayloadPath path,
                                                                     const KvLayout& layout,
                                                                     int device);
// `layer_bases`/`num_pages`: the receiver's pools (device memory on `device`), whose handles
// CUDA IPC exports.
Result<std::unique_ptr<DevicePayloadReceiver>> MakeDevicePayloadReceiver(
    PayloadPath path, const KvLayout& layout, int device, std::vector<void*> layer_bases,
    int num_pages);

// Device memory for KV pools and benchmarks (Unimplemented without CUDA).
Result<void*> AllocateDeviceMemory(int device, size_t bytes);
void FreeDeviceMemory(int device, void* ptr);
// Median seconds of a cudaMemcpy device-to-device of `bytes` on `device`, over `iters` runs.
Result<double> TimeDeviceCopy(int device, size_t bytes, int iters);

// "none" without CUDA; otherwise e.g. "13.0" (runtime) and "2.27.3" (NCCL).
std::string CudaRuntimeVersion();
std::string CudaDriverVersion();
std::string NcclVersion();
int CudaDeviceCount();                   // 0 without CUDA or without a device
std::string CudaDeviceName(int device);  // "none" when absent

}  // namespace pdserve::kv_transfer
