// The CPU's multiply-add peak, measured: `threads` OpenMP threads each run independent chains of
// vector FMAs on registers for a few milliseconds. `bench engine` reports it beside the memory
// bandwidth, so a run says which state of a shared machine it caught (on small cloud VMs both
// move from minute to minute), and so compute-bound figures (batched decode, prefill) can be read
// as a fraction of what the cores can do. Takes the whole machine while it runs; any thread.
#pragma once

#include "model/cpu_matmul.h"

namespace pdserve::bench {

// Best of `passes` timings, in GFLOP/s (an FMA counts two), with the vector width of `isa`.
double FmaPeakGflops(int threads, model::MatMulIsa isa, int passes = 3);

}  // namespace pdserve::bench
