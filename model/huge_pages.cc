#include "model/huge_pages.h"

#include <sys/mman.h>

#include <spdlog/spdlog.h>
#include <algorithm>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <new>
#include <string>

namespace pdserve::model {
namespace {

void WarnOnceIfThpIsOff() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::ifstream file("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string setting;
    if (!std::getline(file, setting) || ThpSettingHonoursMadvise(setting)) return;
    spdlog::warn(
        "transparent huge pages are off ({}): the CPU engine's weights and KV pool sit in 4 KiB "
        "pages, which costs decode TLB misses; set /sys/kernel/mm/transparent_hugepage/enabled "
        "to madvise",
        setting);
  });
}

}  // namespace

size_t ParseMemAvailable(std::string_view meminfo) {
  constexpr std::string_view kKey = "MemAvailable:";
  const size_t at = meminfo.find(kKey);
  if (at == std::string_view::npos) return 0;
  size_t kib = 0;
  for (size_t i = at + kKey.size(); i < meminfo.size() && meminfo[i] != '\n'; ++i) {
    if (meminfo[i] >= '0' && meminfo[i] <= '9') kib = kib * 10 + (meminfo[i] - '0');
  }
  return kib * 1024;
}

size_t AvailableMemoryBytes() {
  std::ifstream file("/proc/meminfo");
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return ParseMemAvailable(text);
}

bool CopyFitsInMemory(size_t bytes, size_t available) {
  return available == 0 || bytes <= available / 4;
}

bool ThpSettingHonoursMadvise(std::string_view setting) {
  return setting.find("[always]") != std::string_view::npos ||
         setting.find("[madvise]") != std::string_view::npos;
}

std::shared_ptr<void> AllocateHugePageBuffer(size_t bytes) {
  WarnOnceIfThpIsOff();
  constexpr size_t kHugePage = 2u << 20;
  const size_t rounded = (std::max<size_t>(bytes, 1) + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (!p) throw std::bad_alloc();
  // Advice only: without THP (or with it off) the memory is ordinary pages.
  ::madvise(p, rounded, MADV_HUGEPAGE);
  return std::shared_ptr<void>(p, std::free);
}

std::shared_ptr<void> AllocateZeroedHugePageBuffer(size_t bytes) {
  WarnOnceIfThpIsOff();
  constexpr size_t kHugePage = 2u << 20;
  const size_t rounded = (std::max<size_t>(bytes, 1) + kHugePage - 1) / kHugePage * kHugePage;
  // Map a huge page more than needed, then unmap what lies before the first 2 MiB boundary and
  // after the buffer.
  const size_t mapped = rounded + kHugePage;
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > base) ::munmap(p, aligned - base);
  const size_t tail = base + mapped - (aligned + rounded);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + rounded), tail);
  void* buffer = reinterpret_cast<void*>(aligned);
  ::madvise(buffer, rounded, MADV_HUGEPAGE);
  return std::shared_ptr<void>(buffer, [rounded](void* b) { ::munmap(b, rounded); });
}

}  // namespace pdserve::model
