#include "bench/kv/bench_kv.h"

#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/kv/bench_kv_receiver.h"
#include "bench/kv/bench_kv_setup.h"
#include "bench/kv/bench_kv_sockets.h"
#include "bench/kv/loopback_cpus.h"
#include "bench/serve/metrics.h"
#include "common/json_text.h"
#include "kv_transfer/crc32c.h"
#include "kv_transfer/device_payload.h"
#include "kv_transfer/page_runs.h"
#include "kv_transfer/tcp_congestion.h"
#include "kv_transfer/tcp_transport.h"

namespace pdserve::bench {
namespace {

namespace kvt = kv_transfer;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

kvt::PayloadPath PathOf(const std::string& t) {
  if (t == "nccl") return kvt::PayloadPath::kNccl;
  if (t == "ipc") return kvt::PayloadPath::kCudaIpc;
  return kvt::PayloadPath::kTcp;
}

// --- Driver side ---

// The same percentile definition as the quartiles beside it (bench::Percentile, interpolated).
double Median(std::vector<double> v) { return bench::Percentile(std::move(v), 50); }

// One side's CPU for one kind of message over the iterations of a size: seconds of CPU, and how
// busy the side was (CPU seconds per second of the message; the side near 1, or above with
// several threads, is the one that limits).
struct CpuSamples {
  std::vector<double> seconds, busy;
  void Add(double cpu_s, double wall_s) {
    seconds.push_back(cpu_s);
    busy.push_back(cpu_s / wall_s);
  }
};

// Their medians: CPU microseconds per MiB and busy share; 0 without samples (no socket baseline).
struct CpuFigures {
  double us_per_mib = 0, busy = 0;
};

CpuFigures Summarize(const CpuSamples& c, uint64_t bytes) {
  if (c.seconds.empty()) return {};
  return {Median(c.seconds) / (static_cast<double>(bytes) / (1 << 20)) * 1e6, Median(c.busy)};
}

struct Row {
  uint64_t bytes;
  double seconds, gbps, baseline_gbps, ratio;
  double ratio_p25 = 0, ratio_p75 = 0;        // the spread of the per-iteration ratios
  double open_s = 0, push_s = 0, wait_s = 0;  // medians of the phases (KvTiming)
  int runs = 0;                               // runs of pages of the last push (KvTiming::runs)
  double checksummed_gbps = 0, ratio_vs_checksummed = 0;  // with --checksummed-baseline
  // The KV message's and the plain baseline's CPU, on the sending side (driver) and the
  // receiving side.
  CpuFigures kv_tx, kv_rx, base_tx, base_rx;
  // Every iteration's KV and baseline seconds, in the order measured (the figures above are
  // their medians and the medians of their pairs; IPC's baseline is one device copy).
  std::vector<double> kv_iterations, baseline_iterations;
};

// Where one KV message's time went, in seconds: Open (the page lists checked and coalesced),
// PushLayer (until the last chunk is handed to the socket: for CUDA IPC, the copies too), and
// Wait (until every chunk's ack is in).
struct KvTiming {
  double open = 0, push = 0, wait = 0;
  // Runs of pages contiguous at both ends (CoalesceRuns): a push sends each as one chunk or
  // more (max_chunk_bytes and lead_chunk_bytes for TCP, device_piece_bytes for CUDA IPC).
  size_t runs = 0;
  double total() const { return open + push + wait; }
};

// One KV message: open, push the layer, wait for every chunk's ack.
Result<KvTiming> TimeKv(kvt::TcpTransport& transport, uint64_t id, int n,
                        const std::vector<int32_t>& dst, const kvt::TransferSecret& secret) {
  std::vector<int32_t> src(n);
  for (int i = 0; i < n; ++i) src[i] = i;
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  KvTiming t;
  PDSERVE_ASSIGN_OR_RETURN(const std::vector<kvt::PageRun> runs, kvt::CoalesceRuns(src, dst));
  t.runs = runs.size();
  auto t0 = Clock::now();
  PDSERVE_RETURN_IF_ERROR(
      transport.Open({id, src, dst, Clock::now() + std::chrono::seconds(100), secret}));
  t.open = since(t0);
  t0 = Clock::now();
  PDSERVE_RETURN_IF_ERROR(transport.PushLayer(id, 0));
  t.push = since(t0);
  t0 = Clock::now();
  PDSERVE_RETURN_IF_ERROR(transport.Wait(id));
  t.wait = since(t0);
  return t;
}

// The baseline: the same bytes by blocking send, received by blocking recv, one-byte ack.
Result<double> TimeBaseline(int fd, int data_fd, const unsigned char* src, uint64_t bytes) {
  PDSERVE_RETURN_IF_ERROR(SendJson(fd, {{"op", "baseline"}, {"bytes", bytes}}));
  const auto t0 = Clock::now();
  PDSERVE_RETURN_IF_ERROR(SendAll(data_fd, src, bytes));
  char ack = 0;
  PDSERVE_RETURN_IF_ERROR(RecvAll(data_fd, &ack, 1));
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A plain socket doing the KV wire format's checksum work and nothing else: the sender CRCs each
// piece just before sending it, the receiver each piece as it lands, and the ack is the CRC.
Result<double> TimeChecksummedBaseline(int fd, int data_fd, const unsigned char* src,
                                       uint64_t bytes) {
  PDSERVE_RETURN_IF_ERROR(SendJson(fd, {{"op", "checksummed_baseline"}, {"bytes", bytes}}));
  const auto t0 = Clock::now();
  uint32_t crc = 0;
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t piece = std::min<uint64_t>(kChecksumPiece, bytes - done);
    crc = kvt::Crc32cFromMemory(src + done, piece, crc);
    PDSERVE_RETURN_IF_ERROR(SendAll(data_fd, src + done, piece));
    done += piece;
  }
  uint32_t echoed = 0;
  PDSERVE_RETURN_IF_ERROR(RecvAll(data_fd, &echoed, sizeof echoed));
  if (echoed != crc) return DataLoss("bench kv: the checksummed baseline's CRC did not match");
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Result<std::vector<Row>> Drive(const BenchKvOptions& o, const std::string& host, uint16_t port,
                               json* env) {
  const kvt::KvLayout layout = BenchLayout();
  const int num_pages = static_cast<int>(o.max_bytes / layout.page_bytes());
  BenchPool memory;
  PDSERVE_RETURN_IF_ERROR(MakePool(o, num_pages * layout.page_bytes(), &memory));
  PDSERVE_ASSIGN_OR_RETURN(const int fd, Dial(host, port, o.congestion));
  FdCloser close_control{fd};
  PDSERVE_ASSIGN_OR_RETURN(json hello, RecvJson(fd));
  (*env)["hosts"] = {HostName(), hello.value("host", "?")};
  json receiver = {{"host", hello.value("host", "?")}};
  for (const char* key : {"gpu_model", "driver_version", "cuda_version", "nccl_version"}) {
    // A loopback receiver is this process's child, on this host: the same facts as ours.
    receiver[key] = hello.contains(key) ? hello[key]
                    : o.peer.empty()    ? (*env)[key]
                                        : json("unknown (the receiver did not say)");
  }
  (*env)["receiver"] = std::move(receiver);
  (*env)["congestion_control"] = kvt::CongestionControlOf(fd);
  PDSERVE_ASSIGN_OR_RETURN(const int data_fd, Dial(host, port, o.congestion));
  FdCloser close_data{data_fd};
  kvt::TcpTransportOptions to;
  to.host = host;
  to.port = hello.value("kv_port", uint16_t{0});
  to.path = PathOf(o.transport);
  to.device = o.device;
  to.max_chunk_bytes = o.chunk_bytes;
  to.lead_chunk_bytes = o.lead_chunk_bytes;
  to.splice_min_layer_bytes = o.splice_min_bytes;
  to.splice_max_layer_bytes = o.splice_max_bytes;
  to.congestion_control = o.congestion;
  to.offload_checksums = o.offload_checksums;
  PDSERVE_ASSIGN_OR_RETURN(auto transport,
                           kvt::TcpTransport::Connect(layout, {memory.base()}, num_pages, to));
  // The baseline sends from host memory; GPU runs keep a host copy of the largest message.
  std::vector<unsigned char> host_copy;
  const unsigned char* baseline_src = memory.host();
  const bool ipc = o.transport == "ipc";  // no socket baseline: a device copy instead
  if (memory.host() == nullptr && !ipc) {
    host_copy.assign(o.max_bytes, 7);
    baseline_src = host_copy.data();
  }
  // Sizes are measured round-robin, one iteration of every size at a time, so a slow spell of
  // a shared machine spreads over all sizes instead of spoiling one.
  struct Samples {
    int pages = 0;
    uint64_t bytes = 0;
    std::vector<double> kv, base, paired, checksummed, paired_checksummed;
    std::vector<double> open, push, wait;
    CpuSamples kv_tx, kv_rx, base_tx, base_rx;
    int runs = 0;
  };
  std::vector<Samples> sizes;
  for (uint64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
    Samples s;
    s.pages = static_cast<int>(std::max<uint64_t>(1, bytes / layout.page_bytes()));
    s.bytes = static_cast<uint64_t>(s.pages) * layout.page_bytes();
    sizes.push_back(std::move(s));
  }
  uint64_t next_id = 1;
  for (int it = -1; it < o.iters; ++it) {  // it == -1: warm-up, not counted
    for (Samples& s : sizes) {
      const uint64_t id = next_id++;
      PDSERVE_RETURN_IF_ERROR(SendJson(fd, {{"op", "reserve"}, {"id", id}, {"pages", s.pages}}));
      PDSERVE_ASSIGN_OR_RETURN(json reserved, RecvJson(fd));
      if (reserved.contains("error")) return Internal(reserved["error"].get<std::string>());
      const std::vector<int32_t> dst = reserved["pages"].get<std::vector<int32_t>>();
      const auto secret_bytes = reserved["secret"].get<std::vector<int>>();
      if (secret_bytes.size() != kvt::kTransferSecretBytes) {
        return Internal("the receiver's reservation carries no transfer secret");
      }
      kvt::TransferSecret secret;
      std::copy(secret_bytes.begin(), secret_bytes.end(), secret.begin());
      // The two timings of one iteration run back to back, in alternating order, so the noise
      // of a shared machine hits both alike; the ratio is the median of the paired ratios.
      // The checksummed baseline, when asked for, takes the other side of the KV timing.
      const bool checksummed = o.checksummed_baseline;
      Result<double> base_s = 0.0, sum_s = 0.0;
      double base_tx_cpu = 0;
      auto time_baseline = [&](bool plain) {
        if (plain) {
          const double cpu0 = ProcessCpuSeconds();
          base_s = TimeBaseline(fd, data_fd, baseline_src, s.bytes);
          base_tx_cpu = ProcessCpuSeconds() - cpu0;
        } else if (checksummed) {
          sum_s = TimeChecksummedBaseline(fd, data_fd, baseline_src, s.bytes);
        }
        return base_s.ok() ? sum_s.status() : base_s.status();
      };
      // CUDA IPC's baseline is a device copy, timed after the loop: a socket baseline here would
      // be thrown away, and its idling leaves the receiver's listener slow to wake for the next
      // push (docs/benchmarks.md, CUDA IPC).
      const bool baseline_first = it % 2 != 0;
      if (!ipc) PDSERVE_RETURN_IF_ERROR(time_baseline(baseline_first));
      const double kv_cpu0 = ProcessCpuSeconds();
      PDSERVE_ASSIGN_OR_RETURN(const KvTiming kv, TimeKv(*transport, id, s.pages, dst, secret));
      const double kv_tx_cpu = ProcessCpuSeconds() - kv_cpu0;
      const double kv_s = kv.total();
      s.runs = static_cast<int>(kv.runs);
      PDSERVE_RETURN_IF_ERROR(SendJson(fd, {{"op", "wait"}, {"id", id}}));
      PDSERVE_ASSIGN_OR_RETURN(json waited, RecvJson(fd));
      if (!waited.value("error", "").empty()) return Internal(waited["error"].get<std::string>());
      if (!ipc) PDSERVE_RETURN_IF_ERROR(time_baseline(!baseline_first));
      PDSERVE_RETURN_IF_ERROR(SendJson(fd, {{"op", "cpu"}}));
      PDSERVE_ASSIGN_OR_RETURN(json cpu, RecvJson(fd));
      if (it >= 0) {
        s.kv.push_back(kv_s);
        s.open.push_back(kv.open);
        s.push.push_back(kv.push);
        s.wait.push_back(kv.wait);
        s.kv_tx.Add(kv_tx_cpu, kv_s);
        s.kv_rx.Add(cpu.value("kv_s", 0.0), kv_s);
        if (!ipc) {
          s.base.push_back(*base_s);
          s.paired.push_back(*base_s / kv_s);
          s.base_tx.Add(base_tx_cpu, *base_s);
          s.base_rx.Add(cpu.value("baseline_s", 0.0), *base_s);
        }
        if (checksummed) {
          s.checksummed.push_back(*sum_s);
          s.paired_checksummed.push_back(*sum_s / kv_s);
        }
      }
    }
  }
  std::vector<Row> rows;
  for (Samples& s : sizes) {
    if (ipc) {  // the IPC target: a device-to-device copy of the same bytes
      PDSERVE_ASSIGN_OR_RETURN(double d2d, kvt::TimeDeviceCopy(o.device, s.bytes, o.iters));
      s.base.assign(1, d2d);
      for (double kv : s.kv) s.paired.push_back(d2d / kv);  // each iteration against the copy
    }
    Row r;
    r.bytes = s.bytes;
    r.seconds = Median(s.kv);
    r.gbps = s.bytes / r.seconds / 1e9;
    r.baseline_gbps = s.bytes / Median(s.base) / 1e9;
    r.ratio = ipc ? r.gbps / r.baseline_gbps : Median(s.paired);
    r.ratio_p25 = bench::Percentile(s.paired, 25);
    r.ratio_p75 = bench::Percentile(s.paired, 75);
    r.open_s = Median(s.open);
    r.push_s = Median(s.push);
    r.wait_s = Median(s.wait);
    r.runs = s.runs;
    r.kv_tx = Summarize(s.kv_tx, s.bytes);
    r.kv_rx = Summarize(s.kv_rx, s.bytes);
    r.base_tx = Summarize(s.base_tx, s.bytes);
    r.base_rx = Summarize(s.base_rx, s.bytes);
    r.kv_iterations = s.kv;
    r.baseline_iterations = s.base;
    std::cout << fmt::format("{:>12} {:>12.1f} {:>10.2f} {:>12.2f} {:>8.2f} {:>9.2f} {:>9.2f}",
                             r.bytes, r.seconds * 1e6, r.gbps, r.baseline_gbps, r.ratio,
                             r.ratio_p25, r.ratio_p75);
    if (!s.checksummed.empty()) {
      r.checksummed_gbps = s.bytes / Median(s.checksummed) / 1e9;
      r.ratio_vs_checksummed = Median(s.paired_checksummed);
      std::cout << fmt::format(" {:>14.2f} {:>8.2f}", r.checksummed_gbps, r.ratio_vs_checksummed);
    }
    std::cout << fmt::format(" {:>9.1f} {:>9.1f} {:>9.1f} {:>6}", r.open_s * 1e6, r.push_s * 1e6,
                             r.wait_s * 1e6, r.runs);
    // CPU of the KV message against the baseline's, on each side (x; "-" without a baseline).
    auto times = [](const CpuFigures& kv, const CpuFigures& base) {
      return base.us_per_mib > 0 ? fmt::format("{:.2f}", kv.us_per_mib / base.us_per_mib)
                                 : std::string("-");
    };
    std::cout << fmt::format(" {:>7} {:>7}\n", times(r.kv_tx, r.base_tx), times(r.kv_rx, r.base_rx))
              << std::flush;
    rows.push_back(r);
  }
  (void)SendJson(fd, {{"op", "quit"}});
  return rows;
}

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// CUDA must not be initialised before the fork below, so a child counts the devices.
int ProbeCudaDevices() {
  const pid_t pid = fork();
  if (pid == 0) _exit(std::min(kvt::CudaDeviceCount(), 100));
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 0;
  return WEXITSTATUS(status);
}

}  // namespace

Status RunBenchKv(const BenchKvOptions& o) {
  const kvt::KvLayout layout = BenchLayout();
  if (o.min_bytes < layout.page_bytes() || o.min_bytes > o.max_bytes) {
    return InvalidArgument(fmt::format("--min-bytes must be >= {} (one page) and <= --max-bytes",
                                       layout.page_bytes()));
  }
  if (o.checksummed_baseline && o.transport != "tcp") {
    return InvalidArgument("--checksummed-baseline goes with --transport tcp");
  }
  if (o.transport != "tcp" && ProbeCudaDevices() == 0) {
    return FailedPrecondition("--transport " + o.transport + " needs a CUDA device; none found");
  }
  if (o.listen >= 0) {  // receiver for a driver on another host
    uint16_t bound = 0;
    auto fd = ListenOn(o.listen, true, &bound);
    if (!fd.ok()) return fd.status();
    std::cout << "pdserve bench kv: listening on control port " << bound << "\n" << std::flush;
    Status s = ServeBenchKv(o, *fd);
    if (!s.ok()) return s;
    return Status::Ok();
  }
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  pid_t child = -1;
  bool pinned = false;  // loopback: the two processes on half the cores each
  if (!o.peer.empty()) {
    const auto colon = o.peer.rfind(':');
    if (colon == std::string::npos) return InvalidArgument("--peer wants HOST:PORT");
    host = o.peer.substr(0, colon);
    port = static_cast<uint16_t>(std::stoi(o.peer.substr(colon + 1)));
  } else {
    // Fork the receiver before any thread starts; it serves on a loopback port chosen by the OS.
    auto fd = ListenOn(0, false, &port);
    if (!fd.ok()) return fd.status();
    const std::optional<CpuSplit> cpus = o.pin ? SplitCpus() : std::nullopt;
    pinned = cpus && sched_setaffinity(0, sizeof cpus->driver, &cpus->driver) == 0;
    child = fork();
    if (child < 0) return Internal("fork failed");
    if (child == 0) {
      if (pinned) (void)sched_setaffinity(0, sizeof cpus->receiver, &cpus->receiver);
      BenchKvOptions receiver_options = o;
      if (o.transport == "nccl") ++receiver_options.device;  // NCCL pairs two GPUs
      Status s = ServeBenchKv(receiver_options, *fd);
      if (!s.ok()) std::cerr << "pdserve bench kv (receiver): " << s.ToString() << "\n";
      _exit(s.ok() ? 0 : 1);
    }
    ::close(*fd);
  }
  json doc;
  doc["date"] = UtcNow();
  doc["transport"] = o.transport;
  doc["iters"] = o.iters;
  doc["chunk_bytes"] = o.chunk_bytes;
  doc["lead_chunk_bytes"] = o.lead_chunk_bytes;
  const bool splices = o.transport == "tcp" && o.splice_min_bytes != kvt::kNeverSplice;
  doc["splice_payloads"] = splices;
  doc["splice_min_bytes"] = splices ? json(o.splice_min_bytes) : json(nullptr);
  doc["splice_max_bytes"] = splices ? json(o.splice_max_bytes) : json(nullptr);
  doc["pinned"] = pinned;
  // Asked for; the receiver's log says whether it had the CPUs to do it.
  doc["offload_checksums"] = o.transport == "tcp" && o.offload_checksums;
  doc["gpu_model"] = kvt::CudaDeviceName(o.device);
  doc["driver_version"] = kvt::CudaDriverVersion();
  doc["cuda_version"] = kvt::CudaRuntimeVersion();
  doc["nccl_version"] = kvt::NcclVersion();
  doc["baseline"] = o.transport == "ipc"
                        ? "cudaMemcpy device-to-device of the same bytes, one process"
                        : "blocking socket send/recv of the same bytes, same two processes";
  doc["ratio_method"] =
      o.transport == "ipc"
          ? "median KV GB/s over median device-copy GB/s"
          : "median over iterations of baseline time / KV time, timed back to back";
  // Said in the results because a size's figures depend on its neighbours (docs/benchmarks.md,
  // KV transfer).
  doc["order"] =
      "sizes in turn: one iteration of every size, smallest to largest, then the next iteration";
  const std::string congestion = kvt::ResolveCongestionControl(o.congestion);
  std::cout << fmt::format(
                   "# pdserve bench kv: transport {}, {} iterations (median), TCP congestion "
                   "control {}\n",
                   o.transport, o.iters, congestion.empty() ? "of the host" : congestion)
            << fmt::format("{:>12} {:>12} {:>10} {:>12} {:>8} {:>9} {:>9}", "bytes", "time_us",
                           "GB/s", "baseline_GB/s", "ratio", "ratio_p25", "ratio_p75")
            << (o.checksummed_baseline ? fmt::format(" {:>14} {:>8}", "crc_base_GB/s", "vs_crc")
                                       : std::string())
            << fmt::format(" {:>9} {:>9} {:>9} {:>6} {:>7} {:>7}\n", "open_us", "push_us",
                           "wait_us", "runs", "tx_cpu", "rx_cpu");
  auto rows = Drive(o, host, port, &doc);
  if (child > 0) {
    int status = 0;
    if (!rows.ok()) kill(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  if (!rows.ok()) return rows.status();
  doc["results"] = json::array();
  for (const Row& r : *rows) {
    doc["results"].push_back({{"bytes", r.bytes},
                              {"time_us", r.seconds * 1e6},
                              {"gbps", r.gbps},
                              {"baseline_gbps", r.baseline_gbps},
                              {"ratio", r.ratio},
                              {"ratio_p25", r.ratio_p25},
                              {"ratio_p75", r.ratio_p75},
                              {"open_us", r.open_s * 1e6},
                              {"push_us", r.push_s * 1e6},
                              {"wait_us", r.wait_s * 1e6},
                              {"runs", r.runs}});
    json& row = doc["results"].back();
    auto micros = [](const std::vector<double>& seconds) {
      json out = json::array();
      for (double s : seconds) out.push_back(s * 1e6);
      return out;
    };
    row["iterations"] = {{"kv_us", micros(r.kv_iterations)},
                         {"baseline_us", micros(r.baseline_iterations)}};
    for (const auto& [name, cpu] :
         {std::pair{"kv_tx", r.kv_tx}, std::pair{"kv_rx", r.kv_rx},
          std::pair{"baseline_tx", r.base_tx}, std::pair{"baseline_rx", r.base_rx}}) {
      row[fmt::format("{}_cpu_us_per_mib", name)] = cpu.us_per_mib;
      row[fmt::format("{}_busy", name)] = cpu.busy;
    }
    if (o.checksummed_baseline) {
      row["checksummed_baseline_gbps"] = r.checksummed_gbps;
      row["ratio_vs_checksummed"] = r.ratio_vs_checksummed;
    }
  }
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    out << DumpJson(doc, 2) << "\n";  // host names come from the peer
    if (!out.flush()) return Unavailable("cannot write " + o.json_path);
  }
  return Status::Ok();
}

}  // namespace pdserve::bench
