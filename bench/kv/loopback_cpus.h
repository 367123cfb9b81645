// Loopback benchmarks put their two processes on CPUs of their own (`pdserve bench kv`). Left
// to the scheduler, a wake-up often stacks the receiver on the sender's CPU and the two then take
// turns, or not, differently from run to run; pinned, both run side by side. Any thread.
#pragma once

#include <sched.h>

#include <optional>

namespace pdserve::bench {

// The CPUs this process may use, split in two: the driver gets the first half of the cores, the
// receiver the rest; hyper-threads stay with their core (one core's threads are split). Empty
// with fewer than 2 CPUs.
struct CpuSplit {
  cpu_set_t driver, receiver;
};
std::optional<CpuSplit> SplitCpus();

}  // namespace pdserve::bench
