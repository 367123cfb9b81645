// Huge-page buffers: aligned, usable, and the THP setting parsed as the kernel writes it.
#include "model/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

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
