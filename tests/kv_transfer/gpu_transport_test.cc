// The GPU payload paths between two real processes: CUDA IPC (both on device 0) and NCCL
// (device 0 -> device 1). Skipped, with the reason, only where the machine has no GPU (or one, for
// NCCL), as device nodes say (tests/gpu_presence.h); where it has them, a build without CUDA, a
// CUDA that finds none, or a probe that crashes fails the test. CUDA is never touched before
// fork: device counts come from a probe child.
#include <gtest/gtest.h>
#include <signal.h>

#include "kv_transfer/device_payload.h"
#include "kv_transfer/tcp_transport.h"
#include "tests/gpu_presence.h"
#include "tests/kv_transfer/kv_test_util.h"

#if PDSERVE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace pdserve::kv_transfer {
namespace {

using namespace std::chrono_literals;
using testing::FillPage;
using testing::PageMatches;
using testing::WaitChild;
using testing::WordPipe;

// The number of CUDA devices, asked in a child so this process stays fork-safe; -1 when the
// child could not be started, crashed or hung.
int ProbeDevices() {
  const pid_t pid = fork();
  if (pid == 0) _exit(std::min(CudaDeviceCount(), 100));
  return pid < 0 ? -1 : WaitChild(pid, 60s);
}

#if PDSERVE_HAVE_CUDA
constexpr bool kHaveCuda = true;
#else
constexpr bool kHaveCuda = false;
#endif
#if PDSERVE_HAVE_CUDA && PDSERVE_HAVE_NCCL
constexpr bool kHaveNccl = true;
#else
constexpr bool kHaveNccl = false;
#endif

// Skips the calling test where the machine has fewer than `needed` GPUs; with them, fails it
// unless the build (`built`) and CUDA can use them.
#define REQUIRE_CUDA_DEVICES(needed, built)                                                 \
  do {                                                                                      \
    const int present = ::pdserve::testing::GpusPresent();                                  \
    if (present < (needed)) {                                                               \
      GTEST_SKIP() << "needs " << (needed) << " GPU(s); this machine has " << present       \
                   << " (/dev/nvidiaN)";                                                    \
    }                                                                                       \
    ASSERT_TRUE(built) << "GPUs are present, but this build lacks CUDA (or NCCL)";          \
    const int devices = ProbeDevices();                                                     \
    ASSERT_GE(devices, (needed)) << present << " GPU(s) present, but the CUDA probe found " \
                                 << devices << " (-1: it crashed or hung)";                 \
  } while (0)

#if PDSERVE_HAVE_CUDA
constexpr int kPages = 512, kRequestPages = 320;  // 20 MiB a layer

// Layers 0..n-1 of `pages` KV pages each, in one device allocation.
struct DevicePool {
  DevicePool(const KvLayout& layout, int device, int pages) : layout(layout), device(device) {
    cudaSetDevice(device);
    cudaMalloc(&memory, layout.page_bytes() * pages * layout.n_layers);
    for (int l = 0; l < layout.n_layers; ++l) {
      bases.push_back(static_cast<unsigned char*>(memory) + layout.page_bytes() * pages * l);
    }
  }
  ~DevicePool() { cudaFree(memory); }
  void Fill(uint64_t request, const std::vector<int32_t>& page_ids) {
    std::vector<unsigned char> host(layout.page_bytes());
    for (int l = 0; l < layout.n_layers; ++l)
      for (size_t i = 0; i < page_ids.size(); ++i) {
        FillPage(host.data(), host.size(), request, l, i);
        cudaMemcpy(static_cast<unsigned char*>(bases[l]) + page_ids[i] * layout.page_bytes(),
                   host.data(), host.size(), cudaMemcpyHostToDevice);
      }
  }
  bool Check(uint64_t request, const std::vector<int32_t>& page_ids) {
    std::vector<unsigned char> host(layout.page_bytes());
    for (int l = 0; l < layout.n_layers; ++l)
      for (size_t i = 0; i < page_ids.size(); ++i) {
        cudaMemcpy(host.data(),
                   static_cast<unsigned char*>(bases[l]) + page_ids[i] * layout.page_bytes(),
                   host.size(), cudaMemcpyDeviceToHost);
        if (!PageMatches(host.data(), host.size(), request, l, i)) return false;
      }
    return true;
  }
  KvLayout layout;
  int device;
  void* memory = nullptr;
  std::vector<void*> bases;
};

// Pushes a request's 4 layers from a process on send_device to one on recv_device and checks
// every byte there. Scattered: its source pages are many one-page runs (the IPC copy kernel);
// else one run a layer, cut into chunks of device_piece_bytes (IPC: a header as each copies).
void RunPair(PayloadPath path, int send_device, int recv_device, bool scattered = true,
             size_t device_piece_bytes = TcpTransportOptions{}.device_piece_bytes) {
  const KvLayout layout = *KvLayout::Make("gpu-test", model::DType::kBF16, 4, 8, 128, 16);
  WordPipe to_sender;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // receiver
    DevicePool pool(layout, recv_device, kPages);
    model::KvPagePool pages(kPages);
    KvReceiver receiver(layout, pages, pool.bases);
    TcpKvListenerOptions lo;
    lo.device = recv_device;
    lo.pools_on_device = true;  // else the listener refuses the IPC or NCCL hello
    auto listener = TcpKvListener::Start(receiver, lo);
    if (!listener.ok()) _exit(2);
    auto res = receiver.Reserve(5, kRequestPages, Clock::now() + 60s);
    if (!res.ok()) _exit(3);
    to_sender.Write((*listener)->port());
    for (int32_t p : res->pages) to_sender.Write(static_cast<uint64_t>(p));
    to_sender.WriteSecret(res->secret);
    if (!receiver.Wait(5).ok()) _exit(4);
    if (!pool.Check(5, res->pages)) _exit(5);
    pages.Free(*receiver.TakePages(5));
    _exit(pages.used_pages() == 0 ? 0 : 6);
  }
  uint64_t port = 0;
  ASSERT_TRUE(to_sender.Read(&port, 60s));
  std::vector<int32_t> dst(kRequestPages), src(kRequestPages);
  for (int i = 0; i < kRequestPages; ++i) {
    uint64_t w;
    ASSERT_TRUE(to_sender.Read(&w));
    dst[i] = static_cast<int32_t>(w);
    src[i] = scattered ? (i * 7) % kPages : i;  // 7 is prime to kPages: distinct pages
  }
  TransferSecret secret;
  ASSERT_TRUE(to_sender.ReadSecret(&secret));
  DevicePool pool(layout, send_device, kPages);
  pool.Fill(5, src);
  TcpTransportOptions o;
  o.port = static_cast<uint16_t>(port);
  o.path = path;
  o.device = send_device;
  o.connect_timeout = 60s;
  o.device_piece_bytes = device_piece_bytes;
  std::vector<const void*> bases(pool.bases.begin(), pool.bases.end());
  auto t = TcpTransport::Connect(layout, bases, kPages, o);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE((*t)->Open({5, src, dst, Clock::now() + 60s, secret}).ok());
  for (int l = 0; l < layout.n_layers; ++l) ASSERT_TRUE((*t)->PushLayer(5, l).ok());
  Status s = (*t)->Wait(5);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(WaitChild(child, 120s), 0) << "receiver: bytes wrong or pages not freed";
}

// RunPair in a child process: its sender side initializes CUDA, after which a process may not
// fork a CUDA child, so this one never does and the next test can run. The child's failures
// print with this test's output.
void RunPairInChild(PayloadPath path, int send_device, int recv_device, bool scattered = true,
                    size_t device_piece_bytes = TcpTransportOptions{}.device_piece_bytes) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    RunPair(path, send_device, recv_device, scattered, device_piece_bytes);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  EXPECT_EQ(WaitChild(child, 240s), 0) << "the pair failed: see the messages above";
}
#endif

TEST(GpuTransport, CudaIpcBetweenTwoProcessesOnOneGpu) {
  REQUIRE_CUDA_DEVICES(1, kHaveCuda);
#if PDSERVE_HAVE_CUDA
  RunPairInChild(PayloadPath::kCudaIpc, 0, 0);
#endif
}

// A fresh receiver's reservation is one run of pages, as the source is: each layer's 20 MiB go
// as 1 MiB chunks, a copy and an event each, their headers sent as their copies end.
TEST(GpuTransport, CudaIpcLongRunsGoInPiecesHeadedAsTheirCopiesEnd) {
  REQUIRE_CUDA_DEVICES(1, kHaveCuda);
#if PDSERVE_HAVE_CUDA
  RunPairInChild(PayloadPath::kCudaIpc, 0, 0, /*scattered=*/false,
                 /*device_piece_bytes=*/1u << 20);
#endif
}

TEST(GpuTransport, NcclBetweenTwoGpus) {
  REQUIRE_CUDA_DEVICES(2, kHaveNccl);
#if PDSERVE_HAVE_CUDA && PDSERVE_HAVE_NCCL
  RunPairInChild(PayloadPath::kNccl, 0, 1);
#endif
}

}  // namespace
}  // namespace pdserve::kv_transfer
