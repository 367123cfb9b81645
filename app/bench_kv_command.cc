// `pdserve bench kv`: the flags; the benchmark is bench/kv/bench_kv.h.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "app/commands.h"
#include "bench/kv/bench_kv.h"
#include "kv_transfer/tcp_transport.h"

namespace pdserve::app {

namespace kvt = kv_transfer;

void AddBenchKvCommand(CLI::App& bench) {
  auto o = std::make_shared<bench::BenchKvOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "kv", "KV transfer bandwidth/latency sweep between two processes vs a plain socket");
  cmd->add_option("--transport", o->transport, "tcp, nccl or ipc")
      ->check(CLI::IsMember({"tcp", "nccl", "ipc"}));
  cmd->add_option("--min-bytes", o->min_bytes, "Smallest message (default 64 KiB)");
  cmd->add_option("--max-bytes", o->max_bytes, "Largest message (default 1 GiB); sizes double")
      ->check(CLI::Range(uint64_t{1} << 16, uint64_t{64} << 30));
  cmd->add_option("--iters", o->iters, "Timed iterations per size (median reported)")
      ->check(CLI::Range(1, 1000));
  CLI::Option* peer =
      cmd->add_option("--peer", o->peer, "HOST:PORT of a `pdserve bench kv --listen PORT` process");
  cmd->add_option("--listen", o->listen, "Serve as the receiver on this control port")
      ->check(CLI::Range(0, 65535))
      ->excludes(peer);
  cmd->add_option("--device", o->device, "CUDA device (nccl, ipc)");
  cmd->add_option("--chunk-bytes", o->chunk_bytes, "Largest KV chunk (one header, one ack)")
      ->check(CLI::Range(size_t{1} << 16, size_t{1} << 30));
  cmd->add_option("--lead-chunk-bytes", o->lead_chunk_bytes,
                  "TCP: a layer's first chunk, each next one twice the last up to --chunk-bytes "
                  "(0: all chunks --chunk-bytes)")
      ->check(CLI::Range(size_t{0}, size_t{1} << 30));
  cmd->add_option("--congestion", o->congestion,
                  "TCP congestion control of the KV and baseline sockets alike: auto (the host's, "
                  "but cubic or reno instead of bbr), default (the host's), or a name");
  cmd->add_flag("--checksummed-baseline", o->checksummed_baseline,
                "TCP: also time a plain socket whose ends CRC32C the bytes as the KV frames do "
                "(crc_base_GB/s, vs_crc): the transport's own cost apart from its checksums");
  auto* splice_min = cmd->add_option("--splice-min-bytes", o->splice_min_bytes,
                                     "TCP: splice messages of at least this many bytes from the "
                                     "pool into the socket, copy smaller ones (0: splice all)");
  cmd->add_option("--splice-max-bytes", o->splice_max_bytes,
                  "TCP: ... and of at most this many; copy larger ones");
  cmd->add_flag_callback(
         "--copy-payloads", [o] { o->splice_min_bytes = kvt::kNeverSplice; },
         "TCP: copy every KV payload into the socket (sendmsg), splice none")
      ->excludes(splice_min);
  cmd->add_flag("--offload-checksums", o->offload_checksums,
                "TCP: both ends compute payload CRCs on worker threads beside the one that "
                "reads or writes the socket (where each may run on two CPUs or more)");
  cmd->add_flag(
      "!--no-pin", o->pin,
      "Loopback: leave the two processes to the scheduler instead of half the cores each");
  cmd->add_option("--json", o->json_path, "Also write the results to this JSON file");
  cmd->callback([o] { ExitOnError("bench kv", bench::RunBenchKv(*o)); });
}

}  // namespace pdserve::app
