// `pdserve bench kv`: KV transfer bandwidth and latency between two processes, through the real
// Transport (each message is one request's KV chunks, acknowledged after apply), against a plain
// blocking-socket send/recv of the same bytes between the same two processes, in the same run.
// By default it forks a receiver on loopback; `--listen PORT` / `--peer HOST:PORT` span two hosts.
// bench_kv.cc is the driver; the receiving end is bench_kv_receiver.cc, and what both share is
// bench_kv_setup.h. Called by the command (app/bench_kv_command.cc) on the main thread.
#pragma once

#include "bench/kv/bench_kv_setup.h"
#include "common/status.h"

namespace pdserve::bench {

// Runs the sweep `o` describes, prints its table and writes its JSON (o.json_path). OK once
// everything was measured and written; the first error otherwise (a flag that cannot be
// served, a peer that fails, a file that cannot be written).
Status RunBenchKv(const BenchKvOptions& o);

}  // namespace pdserve::bench
