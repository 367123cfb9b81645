// Huge-page buffers: aligned, usable, and the THP setting parsed as the kernel writes it.
#include "model/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>

#include <unistd.h>

namespace pdserve::model {
namespace {

TEST(HugePagesTest, BuffersAreAlignedToAHugePageAndWritable) {
  for (size_t bytes : {size_t{1}, size_t{4096}, size_t{3} << 20}) {
    auto buffer = AllocateHugePageBuffer(bytes);
    ASSERT_NE(buffer, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.get()) % (2u << 20), 0u);
    std::memset(buffer.get(), 0xab, bytes);
    EXPECT_EQ(static_cast<unsigned char*>(buffer.get())[bytes - 1], 0xab);
  }
}

// Resident memory of this process, from /proc/self/statm, in bytes.
size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

TEST(HugePagesTest, AZeroedBufferIsZeroAlignedAndCommittedOnlyWhereTouched) {
  constexpr size_t kBytes = 512u << 20;
  const size_t before = ResidentBytes();
  auto buffer = AllocateZeroedHugePageBuffer(kBytes);
  ASSERT_NE(buffer, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.get()) % (2u << 20), 0u);
  auto* bytes = static_cast<unsigned char*>(buffer.get());
  // Zero at its start, middle and end, and writable everywhere.
  for (size_t at : {size_t{0}, kBytes / 2, kBytes - 1}) {
    EXPECT_EQ(bytes[at], 0) << at;
    bytes[at] = 7;
  }
  // Three touched pages (each at most a 2 MiB huge page) are resident, not the 512 MiB.
  EXPECT_LT(ResidentBytes() - before, size_t{64} << 20);
  buffer.reset();  // unmapped
}

TEST(HugePagesTest, MemAvailableIsReadFromMeminfo) {
  EXPECT_EQ(ParseMemAvailable("MemTotal:       24683620 kB\nMemFree:        20356308 kB\n"
                              "MemAvailable:   24210188 kB\nBuffers: 1 kB\n"),
            size_t{24210188} * 1024);
  EXPECT_EQ(ParseMemAvailable("MemTotal: 1 kB\n"), 0u);
  EXPECT_GT(AvailableMemoryBytes(), 0u);  // this Linux host has /proc/meminfo
}

TEST(HugePagesTest, ACopyTakesAtMostAQuarterOfWhatIsAvailable) {
  EXPECT_TRUE(CopyFitsInMemory(1u << 30, size_t{4} << 30));
  EXPECT_FALSE(CopyFitsInMemory((1u << 30) + 1, size_t{4} << 30));
  EXPECT_TRUE(CopyFitsInMemory(size_t{100} << 30, 0));  // unknown: copy
}

TEST(HugePagesTest, ThpSettingIsReadAsTheKernelWritesIt) {
  EXPECT_TRUE(ThpSettingHonoursMadvise("always [madvise] never"));
  EXPECT_TRUE(ThpSettingHonoursMadvise("[always] madvise never"));
  EXPECT_FALSE(ThpSettingHonoursMadvise("always madvise [never]"));
  EXPECT_FALSE(ThpSettingHonoursMadvise(""));
}

}  // namespace
}  // namespace pdserve::model
