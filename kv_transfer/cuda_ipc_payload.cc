// The CUDA-IPC payload path (a prefill and a decode worker on one GPU): the receiver exports
// its pools' memory handles in the hello reply; the sender maps them once and copies a layer's
// chunks device-to-device straight into the reserved pages, waits for the copies, then sends the
// headers, so the receiver acknowledges bytes that are already in place. Chunks that average a
// MiB or more (or a few smaller ones) go by cudaMemcpyAsync each, with an event after each when
// they are large, so their headers leave as each copy ends; many small runs go by one launch of
// the CUDA backend's copy kernel (model/cuda/copy_tiles.h) and one event. Also device memory
// helpers and version probes. Compiles to stubs without PDSERVE_HAVE_CUDA.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

#include "kv_transfer/gpu_payloads.h"
#include "model/cuda/copy_tiles.h"
#if PDSERVE_HAVE_CUDA_BACKEND
#include "model/cuda/device_memory.h"
#include "model/cuda/kernels.h"
#endif

namespace pdserve::kv_transfer {

#if PDSERVE_HAVE_CUDA
namespace {

// The driver's cuMemGetAddressRange, looked up through the runtime so that nothing links
// libcuda (absent on machines without a GPU driver).
using MemGetAddressRangeFn = int (*)(unsigned long long* base, size_t* size,
                                     unsigned long long ptr);

Result<std::pair<void*, size_t>> AllocationOf(void* ptr) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  PDSERVE_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000,
                                                      cudaEnableDefault, &found));
  if (fn == nullptr || found != cudaDriverEntryPointSuccess) {
    return Unavailable("cuMemGetAddressRange not found in the CUDA driver");
  }
  unsigned long long base = 0;
  size_t size = 0;
  const int rc = reinterpret_cast<MemGetAddressRangeFn>(fn)(
      &base, &size, reinterpret_cast<unsigned long long>(ptr));
  if (rc != 0) return Unavailable(fmt::format("cuMemGetAddressRange failed ({})", rc));
  return std::make_pair(reinterpret_cast<void*>(base), size);
}

// Per layer in the hello reply: the allocation's handle and the layer's offset in it.
struct ExportedLayer {
  cudaIpcMemHandle_t handle;
  uint64_t offset;
};

// Waits for `event`, never past `deadline`.
Status WaitEvent(cudaEvent_t event, Clock::time_point deadline, const char* what) {
  // Spin first: most layers' copies end within the spin, and a sleep would overshoot their end
  // (docs/benchmarks.md, CUDA IPC).
  const auto spin_until = Clock::now() + std::chrono::milliseconds(2);
  for (;;) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return Status::Ok();
    if (e != cudaErrorNotReady) {
      return Unavailable(fmt::format("{}: {}", what, cudaGetErrorString(e)));
    }
    // NotReady is also left as this thread's last error, where the next kernel launch's
    // cudaGetLastError() check would take it for that launch's failure: clear it.
    (void)cudaGetLastError();
    const auto now = Clock::now();
    if (now > deadline) {
      return Status(StatusCode::kDeadlineExceeded, fmt::format("{}: past its deadline", what));
    }
    // Most copies end within a few hundred microseconds, less than a sleep's overshoot.
    if (now < spin_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

class CudaIpcSender final : public DevicePayloadSender {
 public:
  CudaIpcSender(const KvLayout& layout, int device) : layout_(layout), device_(device) {}
  ~CudaIpcSender() override {
    cudaSetDevice(device_);
    if (stream_) cudaStreamSynchronize(stream_);  // no copy still reads the staging buffers
    for (auto& [key, ptr] : opened_) cudaIpcCloseMemHandle(ptr);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Result<std::string> HelloPayload() override { return std::string(); }

  Status OnHelloReply(const std::string& payload, Clock::time_point) override {
    const size_t n = layout_.n_layers;
    if (payload.size() != n * sizeof(ExportedLayer) + sizeof(uint64_t)) {
      return InvalidArgument("CUDA IPC: malformed hello reply");
    }
    std::memcpy(&remote_pages_, payload.data() + n * sizeof(ExportedLayer), sizeof(uint64_t));
    PDSERVE_CUDA_CHECK(cudaSetDevice(device_));
    PDSERVE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (size_t l = 0; l < n; ++l) {
      ExportedLayer e;
      std::memcpy(&e, payload.data() + l * sizeof e, sizeof e);
      const std::string key(reinterpret_cast<const char*>(&e.handle), sizeof e.handle);
      auto it = opened_.find(key);
      if (it == opened_.end()) {  // layers often share one allocation: map it once
        void* ptr = nullptr;
        PDSERVE_CUDA_CHECK(cudaIpcOpenMemHandle(&ptr, e.handle, cudaIpcMemLazyEnablePeerAccess));
        it = opened_.emplace(key, ptr).first;
      }
      remote_bases_.push_back(static_cast<unsigned char*>(it->second) + e.offset);
    }
    return Status::Ok();
  }

  bool SendsBeforeHeader() const override { return true; }

  Status Send(const void* src, int layer, int32_t dst_first, size_t bytes,
              Clock::time_point deadline) override {
    const size_t page_bytes = layout_.page_bytes();
    if (layer < 0 || layer >= static_cast<int>(remote_bases_.size()) || dst_first < 0 ||
        dst_first * page_bytes + bytes > remote_pages_ * page_bytes) {
      pending_.clear();  // the layer's push fails: none of its copies may start
      return OutOfRange("CUDA IPC: chunk outside the receiver's pool");
    }
    pending_.push_back({reinterpret_cast<uint64_t>(src),
                        reinterpret_cast<uint64_t>(remote_bases_[layer] + dst_first * page_bytes),
                        bytes});
    return Status::Ok();
  }

  // Waits for the copies' events in order (StartCopies says where they are): the transport
  // sends each chunk's header while later chunks still copy. After a failure the stream may
  // still hold copies that read the staging buffers: this sender copies no more.
  Status FlushInOrder(Clock::time_point deadline, size_t n_sends,
                      const std::function<void(size_t)>& ready) override {
    if (!broken_.ok()) {
      pending_.clear();
      return broken_;
    }
    if (pending_.empty()) {
      ready(n_sends);
      return Status::Ok();
    }
    Status status = RunCopies(deadline, ready);
    pending_.clear();
    if (!status.ok()) broken_ = status;
    return status;
  }

 private:
  Status RunCopies(Clock::time_point deadline, const std::function<void(size_t)>& ready) {
    PDSERVE_CUDA_CHECK(cudaSetDevice(device_));
    // The launches below report cudaGetLastError(): start from none, whatever this thread's
    // earlier CUDA calls left there (a refused IPC open of another connection, say).
    (void)cudaGetLastError();
    std::vector<size_t> marks;  // after the copies of the first marks[i] sends, events_[i]
    PDSERVE_RETURN_IF_ERROR(StartCopies(&marks));
    for (size_t i = 0; i < marks.size(); ++i) {
      PDSERVE_RETURN_IF_ERROR(WaitEvent(events_[i], deadline, "CUDA IPC copy"));
      ready(marks[i]);
    }
    return Status::Ok();
  }

  // Enqueues pending_'s copies on stream_ and records events after them (EventAt). Copies that
  // average a MiB or more go by cudaMemcpyAsync each (faster than the kernel for large copies:
  // docs/benchmarks.md, CUDA IPC), an event after each; up to kMemcpyMaxRuns smaller ones too,
  // one event after the last; more small ones by one launch of the copy kernel and one event,
  // as a call a run would cost more than their copies.
  Status StartCopies(std::vector<size_t>* marks) {
    uint64_t total = 0;
    for (const model::cuda::CopyRange& r : pending_) total += r.bytes;
    const bool large = total >= kLargeCopyBytes * pending_.size();
#if PDSERVE_HAVE_CUDA_BACKEND
    if (!large && pending_.size() > kMemcpyMaxRuns) {
      PDSERVE_RETURN_IF_ERROR(StartCopyKernel());
      return EventAt(pending_.size(), marks);
    }
#endif
    for (size_t i = 0; i < pending_.size(); ++i) {
      const model::cuda::CopyRange& r = pending_[i];
      PDSERVE_CUDA_CHECK(cudaMemcpyAsync(reinterpret_cast<void*>(r.dst),
                                         reinterpret_cast<const void*>(r.src), r.bytes,
                                         cudaMemcpyDeviceToDevice, stream_));
      if (large || i + 1 == pending_.size()) PDSERVE_RETURN_IF_ERROR(EventAt(i + 1, marks));
    }
    return Status::Ok();
  }

  // Records the next event of events_ on stream_, marking `sends` copies done when it fires.
  Status EventAt(size_t sends, std::vector<size_t>* marks) {
    if (events_.size() == marks->size()) {
      cudaEvent_t e = nullptr;
      PDSERVE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      events_.push_back(e);
    }
    PDSERVE_CUDA_CHECK(cudaEventRecord(events_[marks->size()], stream_));
    marks->push_back(sends);
    return Status::Ok();
  }

  static constexpr size_t kLargeCopyBytes = 1u << 20;

#if PDSERVE_HAVE_CUDA_BACKEND
  // A call costs this thread a few microseconds: past a few runs, one launch is cheaper.
  static constexpr size_t kMemcpyMaxRuns = 4;
  // Copy tiles the staging buffers hold at least (the first flushes' counts grow).
  static constexpr size_t kMinStagedTiles = 1024;

  Status StartCopyKernel() {
    tiles_.clear();
    model::cuda::AppendCopyTiles(pending_, model::cuda::kCopyTileBytes, &tiles_);
    // Growing drops the old staging: the last flush waited for its copies (or broke, and then
    // none start again). At least kMinStagedTiles the first time: each growth of the device
    // buffer is a cudaFree, which waits for the whole device, on the layer-push path.
    const size_t bytes = tiles_.size() * sizeof(model::cuda::CopyTile);
    const size_t capacity =
        std::max(tiles_.size(), kMinStagedTiles) * sizeof(model::cuda::CopyTile);
    PDSERVE_RETURN_IF_ERROR(tiles_host_.Reserve(capacity));
    PDSERVE_RETURN_IF_ERROR(tiles_device_.Reserve(capacity));
    std::memcpy(tiles_host_.get<void>(), tiles_.data(), bytes);
    PDSERVE_CUDA_CHECK(cudaMemcpyAsync(tiles_device_.get<void>(), tiles_host_.get<void>(), bytes,
                                       cudaMemcpyHostToDevice, stream_));
    PDSERVE_CUDA_CHECK(model::cuda::LaunchCopyTiles(tiles_device_.get<model::cuda::CopyTile>(),
                                                    static_cast<int>(tiles_.size()), stream_));
    return Status::Ok();
  }
#endif

  const KvLayout layout_;
  const int device_;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;  // recorded in order by StartCopies, reused each flush
  std::vector<model::cuda::CopyRange> pending_;  // Send()s since the last flush
  Status broken_;  // why a flush failed: copies may still be queued, so no more are started
#if PDSERVE_HAVE_CUDA_BACKEND
  std::vector<model::cuda::CopyTile> tiles_;
  model::cuda::PinnedBuffer tiles_host_;  // staging of tiles_ for the copy kernel
  model::cuda::DeviceBuffer tiles_device_;
#endif
  std::map<std::string, void*> opened_;  // handle bytes -> mapped base
  std::vector<unsigned char*> remote_bases_;
  uint64_t remote_pages_ = 0;
};

class CudaIpcReceiver final : public DevicePayloadReceiver {
 public:
  CudaIpcReceiver(const KvLayout& layout, int device, std::vector<void*> bases, int num_pages)
      : layout_(layout), device_(device), bases_(std::move(bases)), num_pages_(num_pages) {}

  Result<std::string> OnHello(const std::string&, Clock::time_point) override {
    PDSERVE_CUDA_CHECK(cudaSetDevice(device_));
    std::string reply;
    for (void* base : bases_) {
      PDSERVE_ASSIGN_OR_RETURN(auto alloc, AllocationOf(base));
      ExportedLayer e{};
      PDSERVE_CUDA_CHECK(cudaIpcGetMemHandle(&e.handle, alloc.first));
      e.offset = static_cast<unsigned char*>(base) - static_cast<unsigned char*>(alloc.first);
      reply.append(reinterpret_cast<const char*>(&e), sizeof e);
    }
    const uint64_t pages = num_pages_;
    reply.append(reinterpret_cast<const char*>(&pages), sizeof pages);
    return reply;
  }
  // The sender's copy finished before it sent the header: the bytes are in place.
  bool CompleteOnHeader() const override { return true; }
  Status Receive(void*, size_t, Clock::time_point) override { return Status::Ok(); }
  Status Discard(size_t, Clock::time_point) override { return Status::Ok(); }

 private:
  const KvLayout layout_;
  const int device_;
  const std::vector<void*> bases_;
  const int num_pages_;
};

}  // namespace

Result<std::unique_ptr<DevicePayloadSender>> MakeCudaIpcSender(const KvLayout& layout, int device) {
  if (CudaDeviceCount() == 0) return FailedPrecondition("CUDA IPC: no CUDA device");
  return std::unique_ptr<DevicePayloadSender>(new CudaIpcSender(layout, device));
}

Result<std::unique_ptr<DevicePayloadReceiver>> MakeCudaIpcReceiver(const KvLayout& layout,
                                                                   int device,
                                                                   std::vector<void*> layer_bases,
                                                                   int num_pages) {
  if (CudaDeviceCount() == 0) return FailedPrecondition("CUDA IPC: no CUDA device");
  return std::unique_ptr<DevicePayloadReceiver>(
      new CudaIpcReceiver(layout, device, std::move(layer_bases), num_pages));
}

Result<void*> AllocateDeviceMemory(int device, size_t bytes) {
  PDSERVE_CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  PDSERVE_CUDA_CHECK(cudaMalloc(&p, bytes));
  PDSERVE_CUDA_CHECK(cudaMemset(p, 0x5a, bytes));
  return p;
}

void FreeDeviceMemory(int device, void* ptr) {
  cudaSetDevice(device);
  cudaFree(ptr);
}

Result<double> TimeDeviceCopy(int device, size_t bytes, int iters) {
  PDSERVE_CUDA_CHECK(cudaSetDevice(device));
  void *a = nullptr, *b = nullptr;
  PDSERVE_CUDA_CHECK(cudaMalloc(&a, bytes));
  if (cudaMalloc(&b, bytes) != cudaSuccess) {
    cudaFree(a);
    return ResourceExhausted("TimeDeviceCopy: no device memory for the second buffer");
  }
  std::vector<double> times;
  Status status;
  for (int i = -1; i < iters && status.ok(); ++i) {
    const auto t0 = Clock::now();
    if (cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
      status = Unavailable("TimeDeviceCopy: cudaMemcpy failed");
    }
    if (i >= 0) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  cudaFree(a);
  cudaFree(b);
  PDSERVE_RETURN_IF_ERROR(status);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::string CudaRuntimeVersion() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess || v == 0) return "none";
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

std::string CudaDriverVersion() {
  // The kernel module's version ("580.65.06"), as nvidia-smi reports it.
  std::ifstream in("/proc/driver/nvidia/version");
  std::string word;
  while (in >> word) {
    if (word == "Module") {
      if (in >> word) return word;
    }
  }
  return "none";
}

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

std::string CudaDeviceName(int device) {
  cudaDeviceProp prop{};
  if (device < 0 || device >= CudaDeviceCount() ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    return "none";
  }
  return prop.name;
}

#else  // no CUDA

Result<std::unique_ptr<DevicePayloadSender>> MakeCudaIpcSender(const KvLayout&, int) {
  return Unimplemented("KV: this build has no CUDA (CUDA IPC path)");
}
Result<std::unique_ptr<DevicePayloadReceiver>> MakeCudaIpcReceiver(const KvLayout&, int,
                                                                   std::vector<void*>, int) {
  return Unimplemented("KV: this build has no CUDA (CUDA IPC path)");
}
Result<void*> AllocateDeviceMemory(int, size_t) { return Unimplemented("this build has no CUDA"); }
void FreeDeviceMemory(int, void*) {}
Result<double> TimeDeviceCopy(int, size_t, int) { return Unimplemented("this build has no CUDA"); }
std::string CudaRuntimeVersion() { return "none"; }
std::string CudaDriverVersion() { return "none"; }
int CudaDeviceCount() { return 0; }
std::string CudaDeviceName(int) { return "none"; }

#endif

}  // namespace pdserve::kv_transfer
