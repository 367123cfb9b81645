// The x-pdserve-tags parser (gateway/request_tags.h): what the header and --tag give, and the
// malformed items it refuses.
#include "gateway/request_tags.h"

#include <gtest/gtest.h>

namespace pdserve::gateway {
namespace {

TEST(RequestTagsTest, ParsesTagsAsTheHeaderAndFlagGiveThem) {
  auto tags = ParseTags(" env=prod, job = nightly ,,team=");
  ASSERT_TRUE(tags.ok()) << tags.status().ToString();
  EXPECT_EQ(*tags, (std::map<std::string, std::string>{
                       {"env", "prod"}, {"job", "nightly"}, {"team", ""}}));
  EXPECT_TRUE(ParseTags("")->empty());
  EXPECT_FALSE(ParseTags("env").ok());
  EXPECT_FALSE(ParseTags("=prod").ok());
  EXPECT_FALSE(ParseTags("e nv=prod").ok());
  EXPECT_FALSE(ParseTags("env=a=b").ok());
}

TEST(RequestTagsTest, RefusesLongKeysAndValuesThatAreNotUtf8) {
  EXPECT_TRUE(ParseTags(std::string(64, 'k') + "=v").ok());
  EXPECT_FALSE(ParseTags(std::string(65, 'k') + "=v").ok());
  auto bad = ParseTags("env=\xff\xfe");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("UTF-8"), std::string::npos) << bad.status().ToString();
}

}  // namespace
}  // namespace pdserve::gateway
