// Tests for jinja/python_str.h: Python's str semantics on UTF-8 (expected values are what
// CPython 3.11 gives).
#include "jinja/python_str.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pdserve::jinja::py {
namespace {

using Strings = std::vector<std::string>;

TEST(PythonStrTest, CountsCodePoints) {
  EXPECT_EQ(Length("h\u00e9llo \U0001F600"), 7u);
  EXPECT_EQ(Encode(Decode("a\u00e9\u4e2d\U0001F600")), "a\u00e9\u4e2d\U0001F600");
}

TEST(PythonStrTest, StripsUnicodeWhitespaceOrGivenCharacters) {
  EXPECT_EQ(Strip("\u3000 \t a b \u00a0\n", std::nullopt, true, true), "a b");
  EXPECT_EQ(Strip("  a  ", std::nullopt, true, false), "a  ");
  EXPECT_EQ(Strip("  a  ", std::nullopt, false, true), "  a");
  EXPECT_EQ(Strip("xyaxy", std::string("yx"), true, true), "a");
  EXPECT_EQ(Strip("\u00e9a\u00e9", std::string("\u00e9"), true, true), "a");
}

TEST(PythonStrTest, SplitsLikePython) {
  EXPECT_EQ(*Split(" a  b c ", std::nullopt, -1, false), (Strings{"a", "b", "c"}));
  EXPECT_EQ(*Split(" a  b c ", std::nullopt, 1, false), (Strings{"a", "b c "}));
  EXPECT_EQ(*Split(" a  b c ", std::nullopt, 1, true), (Strings{" a  b", "c"}));
  EXPECT_EQ(*Split("a,b,,c", std::string(","), -1, false), (Strings{"a", "b", "", "c"}));
  EXPECT_EQ(*Split("a,b,c", std::string(","), 1, true), (Strings{"a,b", "c"}));
  EXPECT_EQ(*Split("", std::nullopt, -1, false), Strings{});
  EXPECT_EQ(*Split("", std::string(","), -1, false), Strings{""});
  EXPECT_FALSE(Split("abc", std::string(""), -1, false).ok());
  EXPECT_EQ(SplitLines("a\nb\r\nc\rd\u2028e\n", false), (Strings{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(SplitLines("a\r\nb", true), (Strings{"a\r\n", "b"}));
}

TEST(PythonStrTest, ReplacesFindsAndCounts) {
  EXPECT_EQ(Replace("aaa", "a", "b", 2), "bba");
  EXPECT_EQ(Replace("ab", "", "-", -1), "-a-b-");
  EXPECT_EQ(Replace("\u00e9\u00e9", "", "-", 2), "-\u00e9-\u00e9");
  EXPECT_EQ(Find("h\u00e9llo", "l", std::nullopt, std::nullopt, false), 2);
  EXPECT_EQ(Find("hello", "l", std::nullopt, std::nullopt, true), 3);
  EXPECT_EQ(Find("hello", "z", std::nullopt, std::nullopt, false), -1);
  EXPECT_EQ(Find("hello", "l", 3, std::nullopt, false), 3);
  EXPECT_EQ(Count("aaaa", "aa"), 2);
  EXPECT_EQ(Count("abc", ""), 4);
}

TEST(PythonStrTest, MapsCaseWithFullUnicodeMappings) {
  EXPECT_EQ(Upper("stra\u00dfe"), "STRASSE");
  EXPECT_EQ(Lower("\u00c9COLE"), "\u00e9cole");
  EXPECT_EQ(Lower("\u039f\u0394\u039f\u03a3"), "\u03bf\u03b4\u03bf\u03c2");  // final sigma
  EXPECT_EQ(Title("hello wORLD-foo 3rd"), "Hello World-Foo 3Rd");
  EXPECT_EQ(Title("\ufb01ne \u01c6"), "Fine \u01c5");
  EXPECT_EQ(Capitalize("hELLO World"), "Hello world");
  EXPECT_EQ(SwapCase("aBc"), "AbC");
}

TEST(PythonStrTest, Predicates) {
  EXPECT_TRUE(IsDigitString("0123"));
  EXPECT_FALSE(IsDigitString(""));
  EXPECT_TRUE(IsAlphaString("ab\u00e9"));
  EXPECT_TRUE(IsLowerString("abc1"));
  EXPECT_FALSE(IsLowerString("123"));
  EXPECT_TRUE(IsUpperString("ABC1"));
  EXPECT_TRUE(IsSpaceString(" \t\u3000"));
}

TEST(PythonStrTest, PadsLikeCenterLjustRjust) {
  EXPECT_EQ(Pad("a", 4, '*', 0), "*a**");
  EXPECT_EQ(Pad("ab", 5, ' ', 0), "  ab ");
  EXPECT_EQ(Pad("a", 3, '.', 1), "..a");
  EXPECT_EQ(Pad("a", 3, '.', -1), "a..");
  EXPECT_EQ(Pad("abc", 2, '.', 0), "abc");
}

TEST(PythonStrTest, ReprQuotesAndEscapes) {
  EXPECT_EQ(Repr("abc"), "'abc'");
  EXPECT_EQ(Repr("it's"), "\"it's\"");
  EXPECT_EQ(Repr("'\""), "'\\'\"'");
  EXPECT_EQ(Repr("a\nb\t\\"), "'a\\nb\\t\\\\'");
  EXPECT_EQ(Repr(std::string("\x00\x7f", 2)), "'\\x00\\x7f'");
  EXPECT_EQ(Repr("\u00e9\u00a0\u2028\U0001F600"), "'\u00e9\\xa0\\u2028\U0001F600'");
}

TEST(PythonStrTest, FloatReprIsPythons) {
  EXPECT_EQ(FloatRepr(1.0), "1.0");
  EXPECT_EQ(FloatRepr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FloatRepr(1e16), "1e+16");
  EXPECT_EQ(FloatRepr(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(FloatRepr(0.0001), "0.0001");
  EXPECT_EQ(FloatRepr(0.00001), "1e-05");
  EXPECT_EQ(FloatRepr(1.5e-7), "1.5e-07");
  EXPECT_EQ(FloatRepr(-0.0), "-0.0");
  EXPECT_EQ(FloatRepr(2.5e300), "2.5e+300");
  EXPECT_EQ(FloatRepr(1.0 / 0.0), "inf");
}

}  // namespace
}  // namespace pdserve::jinja::py
