// The NCCL payload path (two GPUs, any hosts): one two-rank communicator per connection
// (sender rank 0, receiver rank 1), created on first contact from the unique id that the hello
// carries, non-blocking (ncclConfig_t blocking = 0). Each chunk's header goes on the TCP side
// channel and its bytes by ncclSend/ncclRecv, issued by both sides in header order. Every wait
// polls ncclCommGetAsyncError and the stream, and aborts the communicator at its deadline.
// Compiles to stubs without PDSERVE_HAVE_NCCL.
#include <chrono>
#include <cstring>
#include <thread>

#include "kv_transfer/gpu_payloads.h"

namespace pdserve::kv_transfer {

#if PDSERVE_HAVE_CUDA && PDSERVE_HAVE_NCCL
namespace {

constexpr int kSenderRank = 0, kReceiverRank = 1;

// One side's communicator, stream and completion event.
class NcclLink {
 public:
  explicit NcclLink(int device) : device_(device) {}
  ~NcclLink() {
    cudaSetDevice(device_);
    if (comm_) {
      if (broken_) {
        ncclCommAbort(comm_);
      } else if (Finalized()) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
    }
    if (event_) cudaEventDestroy(event_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  // Finalize on a non-blocking communicator returns ncclInProgress: its flush must be polled to
  // an end before ncclCommDestroy. A peer already gone can keep it from ending; false then, and
  // the caller aborts instead.
  bool Finalized() {
    ncclResult_t state = ncclCommFinalize(comm_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) return false;
    }
    return state == ncclSuccess;
  }

  // Starts joining the communicator; WaitReady completes it.
  Status Init(const ncclUniqueId& id, int rank) {
    PDSERVE_CUDA_CHECK(cudaSetDevice(device_));
    PDSERVE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    PDSERVE_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    PDSERVE_NCCL_CHECK(ncclCommInitRankConfig(&comm_, 2, id, rank, &config));
    return Status::Ok();
  }

  // Until the communicator has no operation in progress; aborts it at the deadline.
  Status WaitReady(Clock::time_point deadline, const char* what) {
    if (!comm_ || broken_) return Unavailable(fmt::format("NCCL {}: communicator is gone", what));
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
      if (rc != ncclSuccess) state = rc;
      if (state == ncclSuccess) return Status::Ok();
      if (state != ncclInProgress) {
        broken_ = true;
        return Unavailable(fmt::format("NCCL {}: {}", what, ncclGetErrorString(state)));
      }
      if (Clock::now() > deadline) return Abort(what);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  // Until the stream's work is done, watching the communicator's errors; aborts at deadline.
  Status WaitStream(Clock::time_point deadline, const char* what) {
    PDSERVE_CUDA_CHECK(cudaEventRecord(event_, stream_));
    for (;;) {
      const cudaError_t e = cudaEventQuery(event_);
      if (e == cudaSuccess) return Status::Ok();
      if (e != cudaErrorNotReady) {
        broken_ = true;
        return Unavailable(fmt::format("NCCL {}: {}", what, cudaGetErrorString(e)));
      }
      (void)cudaGetLastError();  // NotReady stays as the thread's last error otherwise
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        broken_ = true;
        return Unavailable(fmt::format("NCCL {}: {}", what, ncclGetErrorString(state)));
      }
      if (Clock::now() > deadline) return Abort(what);
      std::this_thread::sleep_for(std::chrono::microseconds(10));
    }
  }

  Status Send(const void* src, size_t bytes, Clock::time_point deadline) {
    PDSERVE_RETURN_IF_ERROR(WaitReady(deadline, "init"));
    PDSERVE_CUDA_CHECK(cudaSetDevice(device_));
    PDSERVE_NCCL_CHECK(ncclSend(src, bytes, ncclInt8, kReceiverRank, comm_, stream_));
    return WaitReady(deadline, "send");  // issued; completion is the receiver's ack
  }

  Status Recv(void* dst, size_t bytes, Clock::time_point deadline) {
    PDSERVE_RETURN_IF_ERROR(WaitReady(deadline, "init"));
    PDSERVE_CUDA_CHECK(cudaSetDevice(device_));
    PDSERVE_NCCL_CHECK(ncclRecv(dst, bytes, ncclInt8, kSenderRank, comm_, stream_));
    PDSERVE_RETURN_IF_ERROR(WaitReady(deadline, "recv"));
    return WaitStream(deadline, "recv");
  }

  cudaStream_t stream() const { return stream_; }

 private:
  Status Abort(const char* what) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
    broken_ = true;
    return Status(StatusCode::kDeadlineExceeded,
                  fmt::format("NCCL {}: past its deadline; communicator aborted", what));
  }

  const int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t event_ = nullptr;
  bool broken_ = false;
};

class NcclSender final : public DevicePayloadSender {
 public:
  explicit NcclSender(int device) : link_(device), device_(device) {}

  Result<std::string> HelloPayload() override {
    PDSERVE_CUDA_CHECK(cudaSetDevice(device_));
    PDSERVE_NCCL_CHECK(ncclGetUniqueId(&id_));
    return std::string(reinterpret_cast<const char*>(&id_), sizeof id_);
  }
  Status OnHelloReply(const std::string&, Clock::time_point deadline) override {
    PDSERVE_RETURN_IF_ERROR(link_.Init(id_, kSenderRank));
    return link_.WaitReady(deadline, "init");
  }
  bool SendsBeforeHeader() const override { return false; }
  Status Send(const void* src, int, int32_t, size_t bytes, Clock::time_point deadline) override {
    return link_.Send(src, bytes, deadline);
  }

 private:
  NcclLink link_;
  const int device_;
  ncclUniqueId id_{};
};

class NcclReceiver final : public DevicePayloadReceiver {
 public:
  explicit NcclReceiver(int device) : link_(device), device_(device) {}
  ~NcclReceiver() override {
    if (scratch_) {
      cudaSetDevice(device_);
      cudaFree(scratch_);
    }
  }

  Result<std::string> OnHello(const std::string& payload, Clock::time_point) override {
    if (payload.size() != sizeof(ncclUniqueId)) {
      return InvalidArgument("NCCL: the hello does not carry a unique id");
    }
    ncclUniqueId id;
    std::memcpy(&id, payload.data(), sizeof id);
    // Joins without waiting: the sender joins after our reply; the first Receive waits.
    PDSERVE_RETURN_IF_ERROR(link_.Init(id, kReceiverRank));
    return std::string();
  }
  Status Receive(void* dst, size_t bytes, Clock::time_point deadline) override {
    return link_.Recv(dst, bytes, deadline);
  }
  Status Discard(size_t bytes, Clock::time_point deadline) override {
    if (bytes > scratch_bytes_) {
      PDSERVE_CUDA_CHECK(cudaSetDevice(device_));
      if (scratch_) cudaFree(scratch_);
      scratch_ = nullptr;
      scratch_bytes_ = 0;
      PDSERVE_CUDA_CHECK(cudaMalloc(&scratch_, bytes));
      scratch_bytes_ = bytes;
    }
    return link_.Recv(scratch_, bytes, deadline);
  }

 private:
  NcclLink link_;
  const int device_;
  void* scratch_ = nullptr;  // refused chunks land here
  size_t scratch_bytes_ = 0;
};

}  // namespace

Result<std::unique_ptr<DevicePayloadSender>> MakeNcclSender(const KvLayout&, int device) {
  if (CudaDeviceCount() == 0) return FailedPrecondition("NCCL: no CUDA device");
  return std::unique_ptr<DevicePayloadSender>(new NcclSender(device));
}

Result<std::unique_ptr<DevicePayloadReceiver>> MakeNcclReceiver(const KvLayout&, int device) {
  if (CudaDeviceCount() == 0) return FailedPrecondition("NCCL: no CUDA device");
  return std::unique_ptr<DevicePayloadReceiver>(new NcclReceiver(device));
}

std::string NcclVersion() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess || v == 0) return "none";
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

#else  // no NCCL

Result<std::unique_ptr<DevicePayloadSender>> MakeNcclSender(const KvLayout&, int) {
  return Unimplemented("KV: this build has no NCCL");
}
Result<std::unique_ptr<DevicePayloadReceiver>> MakeNcclReceiver(const KvLayout&, int) {
  return Unimplemented("KV: this build has no NCCL");
}
std::string NcclVersion() { return "none"; }

#endif

}  // namespace pdserve::kv_transfer
