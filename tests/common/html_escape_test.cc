#include "common/html_escape.h"

#include <gtest/gtest.h>

namespace pdserve {
namespace {

TEST(HtmlEscape, EscapesTheFiveSpecialCharactersAndNothingElse) {
  EXPECT_EQ(HtmlEscape(R"(<a href="x">Tom & 'Jerry'</a>)"),
            "&lt;a href=&#34;x&#34;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;");
  EXPECT_EQ(HtmlEscape("plain text, ção, 日本"), "plain text, ção, 日本");
  EXPECT_EQ(HtmlEscape(""), "");
  EXPECT_EQ(HtmlEscape("&amp;"), "&amp;amp;");  // escapes once per call, as given
}

}  // namespace
}  // namespace pdserve
