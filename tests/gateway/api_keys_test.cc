#include "gateway/api_keys.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/model/random_model.h"

namespace pdserve::gateway {
namespace {

using model::testing::TempDir;

std::string Write(const TempDir& dir, const std::string& text) {
  const std::string path = dir / "keys";
  std::ofstream(path) << text;
  return path;
}

TEST(ApiKeysTest, ReadsTheOldFormatUnchanged) {
  TempDir dir;
  auto keys = ApiKeys::Load(Write(dir, "# comment\n\nsha256:" + ApiKeys::Sha256Hex("secret-a") +
                                           " team-a\nkey:secret-b team-b\n"));
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ((*keys)->size(), 2u);
  EXPECT_EQ((*keys)->TenantFor("secret-a"), "team-a");
  EXPECT_EQ((*keys)->TenantFor("secret-b"), "team-b");
  EXPECT_EQ((*keys)->TenantFor("nope"), std::nullopt);
  EXPECT_TRUE((*keys)->limits().empty());
  EXPECT_TRUE((*keys)->default_limits().unlimited());
}

TEST(ApiKeysTest, ReadsTenantLimitsAndADefault) {
  TempDir dir;
  auto keys = ApiKeys::Load(Write(dir,
                                  "default rpm=10\n"
                                  "key:a1 acme rpm=60 tpm=100000\n"
                                  "key:a2 acme\n"
                                  "key:a3 acme tpm=100000 rpm=60\n"
                                  "key:b1 beta tpm=500\n"
                                  "key:c1 gamma\n"));
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  const auto& limits = (*keys)->limits();
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits.at("acme"), (TenantLimits{60, 100000}));
  EXPECT_EQ(limits.at("beta"), (TenantLimits{0, 500}));
  EXPECT_EQ((*keys)->default_limits(), (TenantLimits{10, 0}));
  EXPECT_EQ((*keys)->TenantFor("a2"), "acme");
}

TEST(ApiKeysTest, RefusesBadLimitsSayingWhere) {
  TempDir dir;
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {"key:a acme rpm=x\n", "whole number"},
           {"key:a acme rpm=-1\n", "whole number"},
           {"key:a acme rpm=\n", "whole number"},
           {"key:a acme burst=4\n", "unknown option"},
           {"key:a acme rpm=1 rpm=2\n", "given twice"},
           {"key:a acme rpm=1\nkey:b acme rpm=2\n", "other limits"},
           {"key:a rpm=1\n", "expected"},
           {"key:a\n", "expected"},
           {"default rpm=1\ndefault rpm=2\nkey:a acme\n", "second 'default'"},
           {"default rpm=1\n", "no keys"},
       }) {
    auto keys = ApiKeys::Load(Write(dir, text));
    ASSERT_FALSE(keys.ok()) << text;
    EXPECT_NE(keys.status().message().find(says), std::string::npos)
        << text << " -> " << keys.status().ToString();
  }
  auto keys = ApiKeys::Load(Write(dir, "key:a acme\nkey:b acme rpm=x\n"));
  ASSERT_FALSE(keys.ok());
  EXPECT_NE(keys.status().message().find("keys:2"), std::string::npos) << keys.status().ToString();
}

// Parse reads text already in memory (the fuzz target's way in) exactly as Load reads the file.
TEST(ApiKeysTest, ReadsEachTenantsOverflowRuleNeverByDefault) {
  auto keys = ApiKeys::Parse(
      "key:a1 acme overflow=overflow ttft_slo_ms=500\nkey:b1 beta\nkey:c1 gamma overflow=never\n"
      "key:d1 delta overflow=cheapest\n",
      "inline-keys");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ((*keys)->AdmissionFor("acme").overflow, router::OverflowRule::kOverflow);
  EXPECT_EQ((*keys)->AdmissionFor("acme").ttft_slo_ms, 500);
  EXPECT_EQ((*keys)->AdmissionFor("beta").overflow, router::OverflowRule::kNever);
  EXPECT_EQ((*keys)->AdmissionFor("gamma").overflow, router::OverflowRule::kNever);
  EXPECT_EQ((*keys)->AdmissionFor("delta").overflow, router::OverflowRule::kCheapest);
  auto by_default = ApiKeys::Parse("default overflow=overflow\nkey:b1 beta\n", "inline-keys");
  ASSERT_TRUE(by_default.ok()) << by_default.status().ToString();
  EXPECT_EQ((*by_default)->AdmissionFor("beta").overflow, router::OverflowRule::kOverflow);
  for (const char* bad : {"key:a1 acme overflow=always\n", "key:a1 acme overflow=\n",
                          "key:a1 acme overflow=overflow\nkey:a2 acme overflow=never\n"}) {
    auto refused = ApiKeys::Parse(bad, "inline-keys");
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("inline-keys:"), std::string::npos)
        << refused.status().message();
  }
}

TEST(ApiKeysTest, ReadsEachTenantsZones) {
  auto keys = ApiKeys::Parse("key:a1 acme zones=br\nkey:b1 beta zones=us,eu\nkey:c1 gamma\n",
                             "inline-keys");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ((*keys)->AdmissionFor("acme").zones, (std::set<std::string>{"br"}));
  EXPECT_EQ((*keys)->AdmissionFor("beta").zones, (std::set<std::string>{"eu", "us"}));
  EXPECT_TRUE((*keys)->AdmissionFor("gamma").zones.empty());
  for (const char* bad : {"key:a1 acme zones=\n", "key:a1 acme zones=br,,us\n",
                          "key:a1 acme zones=br\nkey:a2 acme zones=us\n"}) {
    EXPECT_FALSE(ApiKeys::Parse(bad, "inline-keys").ok()) << bad;
  }
}

TEST(ApiKeysTest, ParseReadsTextAsLoadReadsTheFile) {
  TempDir dir;
  const std::string text = "default tpm=7\nkey:a1 acme rpm=3\n\n# c\nkey:b1 beta\n";
  auto loaded = ApiKeys::Load(Write(dir, text));
  auto parsed = ApiKeys::Parse(text, "inline-keys");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ((*parsed)->size(), (*loaded)->size());
  EXPECT_EQ((*parsed)->limits(), (*loaded)->limits());
  EXPECT_EQ((*parsed)->default_limits(), (TenantLimits{0, 7}));
  EXPECT_EQ((*parsed)->TenantFor("b1"), "beta");
  auto bad = ApiKeys::Parse("key:a1 acme\nkey:b1\n", "inline-keys");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("inline-keys:2"), std::string::npos)
      << bad.status().ToString();
}

}  // namespace
}  // namespace pdserve::gateway
