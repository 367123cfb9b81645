#include "bench/kv/bench_kv_setup.h"

#include <unistd.h>

#include <cstring>
#include <ctime>
#include <random>

#include "kv_transfer/device_payload.h"
#include "model/huge_pages.h"

namespace pdserve::bench {

kv_transfer::KvLayout BenchLayout() {
  return *kv_transfer::KvLayout::Make("pdserve-bench-kv", model::DType::kBF16, 1, 8, 128, 16);
}

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

std::string HostName() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

BenchPool::~BenchPool() {
  if (device) kv_transfer::FreeDeviceMemory(device_id, device);
}

Status MakePool(const BenchKvOptions& o, size_t bytes, BenchPool* pool) {
  if (o.transport == "tcp") {
    pool->host_memory = model::AllocateHugePageBuffer(bytes);
    std::mt19937_64 rng(42);
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
      const uint64_t v = rng();
      std::memcpy(pool->host() + i, &v, 8);
    }
    return Status::Ok();
  }
  pool->device_id = o.device;
  PDSERVE_ASSIGN_OR_RETURN(pool->device, kv_transfer::AllocateDeviceMemory(o.device, bytes));
  return Status::Ok();
}

}  // namespace pdserve::bench
