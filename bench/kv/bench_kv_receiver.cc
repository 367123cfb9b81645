#include "bench/kv/bench_kv_receiver.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/kv/bench_kv_sockets.h"
#include "kv_transfer/crc32c.h"
#include "kv_transfer/device_payload.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/tcp_transport.h"
#include "model/kv_pool.h"

namespace pdserve::bench {

namespace kvt = kv_transfer;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

Status ServeBenchKv(const BenchKvOptions& o, int listen_fd) {
  const kvt::KvLayout layout = BenchLayout();
  const int num_pages = static_cast<int>(o.max_bytes / layout.page_bytes());
  BenchPool memory;
  PDSERVE_RETURN_IF_ERROR(MakePool(o, num_pages * layout.page_bytes(), &memory));
  model::KvPagePool pages(num_pages);
  kvt::KvReceiver receiver(layout, pages, {memory.base()});
  kvt::TcpKvListenerOptions lo;
  lo.bind_address = o.listen >= 0 ? "0.0.0.0" : "127.0.0.1";
  lo.device = o.device;
  lo.pools_on_device = o.transport != "tcp";  // MakePool put them on the GPU
  lo.congestion_control = o.congestion;
  lo.offload_tcp_checksums = o.offload_checksums;
  PDSERVE_ASSIGN_OR_RETURN(auto listener, kvt::TcpKvListener::Start(receiver, lo));
  const int fd = ::accept(listen_fd, nullptr, nullptr);
  if (fd < 0) return Unavailable("bench kv: accept failed");
  FdCloser close_control{fd};
  PDSERVE_RETURN_IF_ERROR(ConfigureSocket(fd, o.congestion));
  json hello = {{"kv_port", listener->port()}, {"host", HostName()}};
  if (o.listen >= 0) {
    // A receiver on its own host says what it runs on, so a two-host report names both ends.
    // (Not in the loopback receiver: a forked child must not touch the CUDA its parent opened.)
    hello["gpu_model"] = kvt::CudaDeviceName(o.device);
    hello["driver_version"] = kvt::CudaDriverVersion();
    hello["cuda_version"] = kvt::CudaRuntimeVersion();
    hello["nccl_version"] = kvt::NcclVersion();
  }
  PDSERVE_RETURN_IF_ERROR(SendJson(fd, hello));
  // The baseline's bytes have a connection of their own, like the KV's: a socket that also
  // carries the control messages tunes its buffers to them and runs at half speed in some runs.
  const int data_fd = ::accept(listen_fd, nullptr, nullptr);
  if (data_fd < 0) return Unavailable("bench kv: accept failed");
  FdCloser close_data{data_fd};
  PDSERVE_RETURN_IF_ERROR(ConfigureSocket(data_fd, o.congestion));
  std::vector<unsigned char> baseline_buffer;
  // This side's CPU for the driver's "cpu" op: the last KV message's, from its reserve to its
  // wait, less the baselines received meanwhile, and the last baseline's.
  double kv_mark = 0, baselines_meanwhile = 0, kv_cpu = 0, baseline_cpu = 0;
  for (;;) {
    PDSERVE_ASSIGN_OR_RETURN(json cmd, RecvJson(fd));
    const std::string op = cmd.value("op", "");
    if (op == "reserve") {
      kv_mark = ProcessCpuSeconds();
      baselines_meanwhile = 0;
      auto r = receiver.Reserve(cmd.value("id", 0ull), cmd.value("pages", 0),
                                Clock::now() + std::chrono::seconds(120));
      if (!r.ok()) {
        PDSERVE_RETURN_IF_ERROR(SendJson(fd, {{"error", r.status().ToString()}}));
      } else {
        PDSERVE_RETURN_IF_ERROR(
            SendJson(fd, {{"pages", r->pages},
                          {"secret", std::vector<int>(r->secret.begin(), r->secret.end())}}));
      }
    } else if (op == "wait") {
      const uint64_t id = cmd.value("id", 0ull);
      Status s = receiver.Wait(id);
      if (s.ok()) {
        auto taken = receiver.TakePages(id);
        if (taken.ok()) pages.Free(*taken);
      }
      kv_cpu = ProcessCpuSeconds() - kv_mark - baselines_meanwhile;
      PDSERVE_RETURN_IF_ERROR(SendJson(
          fd, {{"error", s.ok() ? "" : s.ToString()}, {"used_pages", pages.used_pages()}}));
    } else if (op == "baseline") {
      // Plain blocking recv of the same bytes into host memory, then a one-byte ack.
      const uint64_t n = cmd.value("bytes", 0ull);
      if (n > o.max_bytes) return InvalidArgument("bench kv: baseline larger than --max-bytes");
      const double cpu0 = ProcessCpuSeconds();
      if (memory.host() != nullptr) {
        PDSERVE_RETURN_IF_ERROR(RecvAll(data_fd, memory.host(), n));
      } else {
        baseline_buffer.resize(n);
        PDSERVE_RETURN_IF_ERROR(RecvAll(data_fd, baseline_buffer.data(), n));
      }
      const char ack = 1;
      PDSERVE_RETURN_IF_ERROR(SendAll(data_fd, &ack, 1));
      baseline_cpu = ProcessCpuSeconds() - cpu0;
      baselines_meanwhile += baseline_cpu;
    } else if (op == "checksummed_baseline") {
      // The same bytes, each piece CRC32C'd as it lands; the ack is the checksum.
      const uint64_t n = cmd.value("bytes", 0ull);
      if (n > o.max_bytes || memory.host() == nullptr) {
        return InvalidArgument("bench kv: bad checksummed baseline request");
      }
      const double cpu0 = ProcessCpuSeconds();
      uint32_t crc = 0;
      for (uint64_t done = 0; done < n;) {
        const uint64_t piece = std::min<uint64_t>(kChecksumPiece, n - done);
        PDSERVE_RETURN_IF_ERROR(RecvAll(data_fd, memory.host() + done, piece));
        crc = kvt::Crc32c(memory.host() + done, piece, crc);
        done += piece;
      }
      PDSERVE_RETURN_IF_ERROR(SendAll(data_fd, &crc, sizeof crc));
      baselines_meanwhile += ProcessCpuSeconds() - cpu0;
    } else if (op == "cpu") {
      PDSERVE_RETURN_IF_ERROR(SendJson(fd, {{"kv_s", kv_cpu}, {"baseline_s", baseline_cpu}}));
    } else if (op == "quit") {
      return Status::Ok();
    } else {
      return InvalidArgument("bench kv: unknown control op '" + op + "'");
    }
  }
}

}  // namespace pdserve::bench
