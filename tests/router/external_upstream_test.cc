#include "router/external_upstream.h"

#include <gtest/gtest.h>

#include <map>

namespace pdserve::router {
namespace {

using Clock = std::chrono::steady_clock;

TEST(OverflowRuleTest, ParsesTheThreeRulesAndRefusesOthers) {
  EXPECT_EQ(*ParseOverflowRule("never"), OverflowRule::kNever);
  EXPECT_EQ(*ParseOverflowRule("overflow"), OverflowRule::kOverflow);
  EXPECT_EQ(*ParseOverflowRule("cheapest"), OverflowRule::kCheapest);
  EXPECT_FALSE(ParseOverflowRule("always").ok());
  EXPECT_STREQ(OverflowRuleName(OverflowRule::kOverflow), "overflow");
}

TEST(UpstreamUrlTest, ReadsSchemeHostPortAndPrefix) {
  auto a = ParseUpstreamUrl("https://api.openai.com");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->tls);
  EXPECT_EQ(a->host, "api.openai.com");
  EXPECT_EQ(a->port, "443");
  EXPECT_EQ(a->path_prefix, "");
  auto b = ParseUpstreamUrl("http://127.0.0.1:8123/openai/");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->tls);
  EXPECT_EQ(b->port, "8123");
  EXPECT_EQ(b->path_prefix, "/openai");
  auto c = ParseUpstreamUrl("http://[::1]:9000");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, "9000");
  for (const char* bad : {"ftp://x", "api.openai.com", "http://", "http://h:0", "http://h:99999",
                          "http://h:12x", "https://user@h", "http://[::1"}) {
    EXPECT_FALSE(ParseUpstreamUrl(bad).ok()) << bad;
  }
}

TEST(UpstreamsFromFlagsTest, JoinsTheFlagsByName) {
  std::map<std::string, std::string> env{{"OPENAI_KEY", "sk-test"}};
  auto getenv = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto configs = UpstreamsFromFlags({"openai=https://api.openai.com/", "local=http://127.0.0.1:9"},
                                    {"openai=gpt-4o-mini"}, {"openai=OPENAI_KEY"}, getenv);
  ASSERT_TRUE(configs.ok()) << configs.status().message();
  ASSERT_EQ(configs->size(), 2u);
  EXPECT_EQ((*configs)[0].name, "openai");
  EXPECT_EQ((*configs)[0].model, "gpt-4o-mini");
  EXPECT_EQ((*configs)[0].api_key, "sk-test");
  EXPECT_TRUE((*configs)[0].parsed.tls);
  EXPECT_EQ((*configs)[1].model, "");
  EXPECT_EQ((*configs)[1].api_key, "");

  EXPECT_FALSE(UpstreamsFromFlags({"a=http://h", "a=http://g"}, {}, {}, getenv).ok());
  EXPECT_FALSE(UpstreamsFromFlags({"a"}, {}, {}, getenv).ok());
  EXPECT_FALSE(UpstreamsFromFlags({"a=nonsense"}, {}, {}, getenv).ok());
  EXPECT_FALSE(UpstreamsFromFlags({"a=http://h"}, {"b=m"}, {}, getenv).ok());
  auto unset = UpstreamsFromFlags({"a=http://h"}, {}, {"a=NOT_SET"}, getenv);
  ASSERT_FALSE(unset.ok());
  EXPECT_NE(unset.status().message().find("NOT_SET"), std::string::npos);
}

class ExternalUpstreamsTest : public ::testing::Test {
 protected:
  static UpstreamConfig Config(const std::string& name, double in, double out) {
    UpstreamConfig c;
    c.name = name;
    c.input_cost_per_token = in;
    c.output_cost_per_token = out;
    return c;
  }
  ExternalUpstreams Make(std::vector<UpstreamConfig> configs, int min_requests = 3) {
    UpstreamHealthOptions o;
    o.min_requests = min_requests;
    return ExternalUpstreams(std::move(configs), o, [this] { return now_; });
  }
  Clock::time_point now_ = Clock::time_point() + std::chrono::hours(1);
};

// A prompt of `n` tokens; `first` offsets its ids, so that two prompts share no block.
std::vector<int32_t> Prompt(int n, int32_t first = 0) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[static_cast<size_t>(i)] = first + i;
  return p;
}

TEST_F(ExternalUpstreamsTest, PicksTheCheapestForTheRequestsTokens) {
  // a: cheap input, dear output; b: the other way round.
  auto u = Make({Config("a", 1e-6, 10e-6), Config("b", 10e-6, 1e-6)});
  EXPECT_EQ(u.Pick(Prompt(1000), 10), 0);  // long prompt, short answer
  EXPECT_EQ(u.Pick(Prompt(10), 1000), 1);  // short prompt, long answer
  EXPECT_EQ(u.Pick(Prompt(10), 1000, {1}), 0);
  EXPECT_EQ(u.Pick(Prompt(10), 1000, {0, 1}), -1);
  EXPECT_EQ(Make({}).Pick(Prompt(1), 1), -1);
}

TEST_F(ExternalUpstreamsTest, CoolsDownPastHalfItsRequestsFailingAndComesBack) {
  auto u = Make({Config("a", 1e-6, 1e-6), Config("b", 2e-6, 2e-6)});
  u.Record(0, true);
  u.Record(0, false);
  EXPECT_TRUE(u.Available(0));  // one of two: not more than half
  u.Record(0, false);
  EXPECT_FALSE(u.Available(0));        // two of three
  EXPECT_EQ(u.Pick(Prompt(1), 1), 1);  // the dearer one takes over
  EXPECT_NE(u.WhyNone().find("cooling down"), std::string::npos) << u.WhyNone();
  now_ += std::chrono::seconds(29);
  EXPECT_FALSE(u.Available(0));
  now_ += std::chrono::seconds(2);
  EXPECT_TRUE(u.Available(0));  // back, judged afresh
  EXPECT_EQ(u.Pick(Prompt(1), 1), 0);
  u.Record(0, false);
  EXPECT_TRUE(u.Available(0));  // one failure is under min_requests
}

TEST_F(ExternalUpstreamsTest, OnlyTheLastMinuteCounts) {
  auto u = Make({Config("a", 1e-6, 1e-6)});
  u.Record(0, false);
  u.Record(0, false);
  now_ += std::chrono::seconds(61);
  u.Record(0, false);
  u.Record(0, true);
  u.Record(0, true);
  EXPECT_TRUE(u.Available(0));  // the two old failures left the window
}

TEST_F(ExternalUpstreamsTest, WhyNoneSaysWhatEachUpstreamIsDoing) {
  auto u = Make({Config("a", 1e-6, 1e-6), Config("b", 1e-6, 1e-6)}, /*min_requests=*/1);
  u.Record(0, false);
  const std::string why = u.WhyNone({1});
  EXPECT_NE(why.find("'a' is cooling down"), std::string::npos) << why;
  EXPECT_NE(why.find("'b' failed this request"), std::string::npos) << why;
  EXPECT_EQ(Make({}).WhyNone(), "no external upstream is configured");
}

using namespace std::chrono_literals;

class UpstreamPromptCacheTest : public ::testing::Test {
 protected:
  using Clock = std::chrono::steady_clock;
  ExternalUpstreams Make(std::vector<UpstreamConfig> configs, std::chrono::seconds ttl) {
    UpstreamHealthOptions o;
    o.prompt_cache_ttl = ttl;
    return ExternalUpstreams(std::move(configs), o, [this] { return now_; });
  }
  Clock::time_point now_ = Clock::time_point() + std::chrono::hours(1);
};

UpstreamConfig Priced(const std::string& name, double input, double cached, double output) {
  UpstreamConfig c;
  c.name = name;
  c.input_cost_per_token = input;
  c.cached_input_cost_per_token = cached;
  c.output_cost_per_token = output;
  return c;
}

// A prompt sent to an upstream lately is priced there with its whole blocks at the cached-input
// price, until the ttl passes; and that can make the dearer upstream the cheaper pick.
TEST_F(UpstreamPromptCacheTest, APromptSentLatelyIsPricedAtTheCachedInputPrice) {
  auto u = Make({Priced("a", 1e-6, 1e-7, 1e-6), Priced("b", 2e-6, 2e-7, 1e-6)}, 300s);
  const std::vector<int32_t> first = Prompt(1000);
  std::vector<int32_t> next = first;  // the next turn: the same 1,000 tokens and 200 more
  next.insert(next.end(), 200, 7);
  EXPECT_EQ(u.PredictedCachedTokens(1, next), 0);
  EXPECT_DOUBLE_EQ(u.PredictUsd(1, next, 10), 1200 * 2e-6 + 10 * 1e-6);
  EXPECT_EQ(u.Pick(next, 10), 0);
  u.Sent(1, first);
  EXPECT_EQ(u.PredictedCachedTokens(1, next), 992);  // 62 whole blocks of 16
  EXPECT_EQ(u.PredictedCachedTokens(0, next), 0) << "sent to b, not a";
  EXPECT_DOUBLE_EQ(u.PredictUsd(1, next, 10), 208 * 2e-6 + 992 * 2e-7 + 10 * 1e-6);
  double usd = 0;
  EXPECT_EQ(u.Pick(next, 10, {}, &usd), 1) << "b's cached prefix makes it cheaper than a";
  EXPECT_DOUBLE_EQ(usd, u.PredictUsd(1, next, 10));
  EXPECT_EQ(u.PredictedCachedTokens(1, Prompt(1200, 5000)), 0) << "another prompt";
  now_ += 301s;
  EXPECT_EQ(u.PredictedCachedTokens(1, next), 0) << "past the ttl";
  EXPECT_EQ(u.Pick(next, 10), 0);
}

TEST_F(UpstreamPromptCacheTest, WithoutACachedPriceOrWithATtlOfZeroNothingIsDiscounted) {
  UpstreamConfig plain = Priced("a", 1e-6, 0, 1e-6);
  plain.cached_input_cost_per_token.reset();
  auto u = Make({plain}, 300s);
  u.Sent(0, Prompt(320));
  EXPECT_EQ(u.PredictedCachedTokens(0, Prompt(320)), 320);
  EXPECT_DOUBLE_EQ(u.PredictUsd(0, Prompt(320), 0), 320 * 1e-6);  // the input price
  auto off = Make({Priced("a", 1e-6, 1e-7, 1e-6)}, 0s);
  off.Sent(0, Prompt(320));
  EXPECT_EQ(off.PredictedCachedTokens(0, Prompt(320)), 0);
}

}  // namespace
}  // namespace pdserve::router
