// The receiving end of `pdserve bench kv`: the process the driver forks on loopback, or runs on
// another host with `--listen PORT`. It serves one driver on a control socket (a 4-byte length
// and JSON per message): reserve pages for a KV message, which then arrives through its KV
// listener, wait for it, receive the plain-socket baselines on a data connection of their own,
// and report the CPU this process spent on each. Blocks until the driver says quit.
#pragma once

#include "bench/kv/bench_kv_setup.h"
#include "common/status.h"

namespace pdserve::bench {

// `listen_fd`: a listening socket; the driver's control connection, then its data connection,
// are accepted on it.
Status ServeBenchKv(const BenchKvOptions& o, int listen_fd);

}  // namespace pdserve::bench
