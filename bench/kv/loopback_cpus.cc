#include "bench/kv/loopback_cpus.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace pdserve::bench {
namespace {

// The CPUs sharing a core with `cpu` (itself included), from sysfs ("0,64" or "0-1"); empty if
// the kernel does not say.
std::vector<int> SmtSiblings(int cpu) {
  std::ifstream in(fmt::format("/sys/devices/system/cpu/cpu{}/topology/thread_siblings_list", cpu));
  std::string list;
  std::getline(in, list);
  std::vector<int> out;
  std::stringstream items(list);
  std::string item;
  while (std::getline(items, item, ',')) {
    int first = 0, last = 0;
    const char* p = item.c_str();
    char* end = nullptr;
    first = static_cast<int>(std::strtol(p, &end, 10));
    last = *end == '-' ? static_cast<int>(std::strtol(end + 1, nullptr, 10)) : first;
    for (int c = first; c <= last && c - first < 1024; ++c) out.push_back(c);
  }
  return out;
}

}  // namespace

std::optional<CpuSplit> SplitCpus() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) {
    return std::nullopt;
  }
  std::vector<std::vector<int>> cores;
  std::vector<bool> placed(CPU_SETSIZE, false);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &allowed) || placed[c]) continue;
    std::vector<int> core = {c};
    placed[c] = true;
    for (int s : SmtSiblings(c)) {
      if (s >= 0 && s < CPU_SETSIZE && CPU_ISSET(s, &allowed) && !placed[s]) {
        core.push_back(s);
        placed[s] = true;
      }
    }
    cores.push_back(core);
  }
  if (cores.size() < 2) {  // one core's hyper-threads: one each
    std::vector<std::vector<int>> threads;
    for (int c : cores[0]) threads.push_back({c});
    cores = threads;
  }
  CpuSplit split;
  CPU_ZERO(&split.driver);
  CPU_ZERO(&split.receiver);
  for (size_t i = 0; i < cores.size(); ++i) {
    for (int c : cores[i]) CPU_SET(c, i < cores.size() / 2 ? &split.driver : &split.receiver);
  }
  return split;
}

}  // namespace pdserve::bench
