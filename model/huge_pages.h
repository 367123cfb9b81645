// Buffers for data the CPU engine streams from memory every step (packed weight matrices, the
// bandwidth probe): 2 MiB-aligned and advised to transparent huge pages, so a decode step that
// reads every weight once walks hundreds of page-table entries instead of ~100,000. Where the
// kernel has THP off the buffer is still valid, just in 4 KiB pages. Any thread may allocate.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

namespace pdserve::model {

// At least `bytes` of uninitialised memory (rounded up to 2 MiB), freed when the last owner goes.
// Throws std::bad_alloc when the memory cannot be had. The first call on a host whose THP
// setting is "never" logs a warning once.
std::shared_ptr<void> AllocateHugePageBuffer(size_t bytes);

// At least `bytes` of zeroed memory (rounded up to 2 MiB, 2 MiB-aligned, advised to huge pages)
// that the kernel commits as each page is first touched: a KV pool costs memory as it fills,
// not all at start. Throws std::bad_alloc when the address space cannot be had.
std::shared_ptr<void> AllocateZeroedHugePageBuffer(size_t bytes);

// MemAvailable from the text of /proc/meminfo, in bytes; 0 when it is not there.
size_t ParseMemAvailable(std::string_view meminfo);

// This host's MemAvailable, in bytes; 0 when /proc/meminfo cannot be read.
size_t AvailableMemoryBytes();

// Whether a copy of `bytes` into huge pages is worth taking: at most a quarter of `available`
// (so a few workers on one host can each make theirs), or `available` unknown (0).
bool CopyFitsInMemory(size_t bytes, size_t available);

// Whether a THP setting (the text of /sys/kernel/mm/transparent_hugepage/enabled, such as
// "always [madvise] never") lets madvise(MADV_HUGEPAGE) take effect.
bool ThpSettingHonoursMadvise(std::string_view setting);

}  // namespace pdserve::model
