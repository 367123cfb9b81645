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

TEST(HugePagesTest, ThpSettingIsReadAsTheKernelWritesIt) {
  EXPECT_TRUE(ThpSettingHonoursMadvise("always [madvise] never"));
  EXPECT_TRUE(ThpSettingHonoursMadvise("[always] madvise never"));
  EXPECT_FALSE(ThpSettingHonoursMadvise("always madvise [never]"));
  EXPECT_FALSE(ThpSettingHonoursMadvise(""));
}

}  // namespace
}  // namespace pdserve::model
