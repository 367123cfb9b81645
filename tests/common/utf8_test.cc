// UTF-8 well-formedness: what a JSON string cannot hold is found at its first byte.
#include "common/utf8.h"

#include <gtest/gtest.h>

namespace pdserve {
namespace {

TEST(Utf8, FindInvalidUtf8RefusesWhatAJsonStringCannotHold) {
  EXPECT_EQ(FindInvalidUtf8(""), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("plain, ção, 日本, \xF0\x9F\x98\x80"), std::nullopt);  // 1 to 4 bytes
  EXPECT_EQ(FindInvalidUtf8("\xff\xfe"), 0u);                                      // never in UTF-8
  EXPECT_EQ(FindInvalidUtf8("a\xc3("), 1u);            // a lead byte without its tail
  EXPECT_EQ(FindInvalidUtf8("\xe6\x97"), 0u);          // cut short at the end
  EXPECT_EQ(FindInvalidUtf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("\xe0\x80\xaf"), 0u);      // overlong, three bytes
  EXPECT_EQ(FindInvalidUtf8("\xed\xa0\x80"), 0u);      // a UTF-16 surrogate
  EXPECT_EQ(FindInvalidUtf8("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("\x80"), 0u);              // a continuation byte alone
}

}  // namespace
}  // namespace pdserve
