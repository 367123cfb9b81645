// PriceSheet: LiteLLM-format files, including LiteLLM's own oddities (sample_spec, entries
// without prices), and clear errors naming the file and the entry.
#include "ledger/price_sheet.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/model/random_model.h"

namespace pdserve::ledger {
namespace {

using model::testing::TempDir;

// A cut of LiteLLM's model_prices_and_context_window.json, shapes kept as they are there.
constexpr char kLiteLlmCut[] = R"({
  "sample_spec": {
    "max_tokens": "LEGACY parameter. set to max_output_tokens if provider specifies it.",
    "input_cost_per_token": 0.0000, "output_cost_per_token": 0.000,
    "litellm_provider": "one of https://docs.litellm.ai/docs/providers", "mode": "one of: chat"
  },
  "gpt-4o": {"max_tokens": 16384, "input_cost_per_token": 2.5e-06,
             "output_cost_per_token": 1e-05, "cache_read_input_token_cost": 1.25e-06,
             "litellm_provider": "openai", "mode": "chat", "supports_vision": true},
  "claude-3-5-haiku-20241022": {"input_cost_per_token": 8e-07, "output_cost_per_token": 4e-06,
             "litellm_provider": "anthropic", "mode": "chat"},
  "dall-e-3": {"mode": "image_generation", "output_cost_per_image": 0.04,
               "litellm_provider": "openai"},
  "text-embedding-3-small": {"input_cost_per_token": 2e-08, "output_cost_per_token": 0.0,
                             "litellm_provider": "openai", "mode": "embedding"},
  "free-tier": {"input_cost_per_token": null, "output_cost_per_token": null}
})";

TEST(PriceSheetTest, ReadsLiteLlmFormatAndSkipsUnpricedEntries) {
  auto sheet = PriceSheet::Parse(kLiteLlmCut, "prices.json");
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  ASSERT_EQ(sheet->prices().size(), 3u);
  EXPECT_EQ(sheet->prices()[0].name, "claude-3-5-haiku-20241022");
  EXPECT_EQ(sheet->prices()[1].name, "gpt-4o");
  EXPECT_EQ(sheet->prices()[1].provider, "openai");
  EXPECT_DOUBLE_EQ(sheet->prices()[1].input_cost_per_token, 2.5e-06);
  EXPECT_DOUBLE_EQ(sheet->prices()[1].output_cost_per_token, 1e-05);
  EXPECT_EQ(sheet->prices()[2].name, "text-embedding-3-small");
  EXPECT_EQ(sheet->prices()[2].output_cost_per_token, 0.0);
}

TEST(PriceSheetTest, ReadsTheCachedInputPriceAndDefaultsItToTheInputPrice) {
  auto sheet = PriceSheet::Parse(kLiteLlmCut, "prices.json");
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  const ApiPrice& gpt = sheet->prices()[1];
  ASSERT_EQ(gpt.name, "gpt-4o");
  ASSERT_TRUE(gpt.cache_read_cost_per_token.has_value());
  EXPECT_DOUBLE_EQ(gpt.cached_input_cost_per_token(), 1.25e-06);
  const ApiPrice& haiku = sheet->prices()[0];
  EXPECT_FALSE(haiku.cache_read_cost_per_token.has_value());
  EXPECT_DOUBLE_EQ(haiku.cached_input_cost_per_token(), 8e-07);
  auto bad = PriceSheet::Parse(
      R"({"m": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6,
                "cache_read_input_token_cost": "cheap"}})",
      "prices.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cache_read_input_token_cost"), std::string::npos)
      << bad.status().ToString();
}

TEST(PriceSheetTest, SelectsNamedApisInOrderOrAll) {
  auto sheet = PriceSheet::Parse(kLiteLlmCut, "prices.json");
  ASSERT_TRUE(sheet.ok());
  auto two = sheet->Select({"gpt-4o", "claude-3-5-haiku-20241022"});
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].name, "gpt-4o");
  EXPECT_EQ(sheet->Select({})->size(), 3u);
  auto unpriced = sheet->Select({"dall-e-3"});
  EXPECT_EQ(unpriced.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unpriced.status().message().find("dall-e-3"), std::string::npos);
}

TEST(PriceSheetTest, LoadsAFileAndNamesItInErrors) {
  TempDir dir;
  { std::ofstream(dir / "ok.json") << kLiteLlmCut; }
  auto ok = PriceSheet::Load(dir / "ok.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->prices().size(), 3u);

  auto missing = PriceSheet::Load(dir / "missing.json");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.json"), std::string::npos);

  { std::ofstream(dir / "bad.json") << "{\"gpt-4o\": {\"input_cost_per_token\": 1e-6,"; }
  auto bad = PriceSheet::Load(dir / "bad.json");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bad.json"), std::string::npos);
  EXPECT_NE(bad.status().message().find("not JSON"), std::string::npos);
}

TEST(PriceSheetTest, APriceThatIsNotANonNegativeNumberIsAnErrorNamingTheEntry) {
  for (const char* cost : {"\"0.001\"", "-1e-6", "true", "[1]"}) {
    const std::string text = std::string(R"({"gpt-4o": {"input_cost_per_token": 1e-6, )") +
                             R"("output_cost_per_token": )" + cost + "}}";
    auto sheet = PriceSheet::Parse(text, "sheet.json");
    ASSERT_FALSE(sheet.ok()) << cost;
    EXPECT_NE(sheet.status().message().find("sheet.json"), std::string::npos);
    EXPECT_NE(sheet.status().message().find("\"gpt-4o\""), std::string::npos);
    EXPECT_NE(sheet.status().message().find("output_cost_per_token"), std::string::npos)
        << sheet.status().ToString();
  }
  // Nested 200,000 deep: quoted whole in the message, it overflowed the stack.
  const std::string deep = R"({"m": {"input_cost_per_token": )" + std::string(200000, '[') + "1" +
                           std::string(200000, ']') + R"(, "output_cost_per_token": 1}})";
  auto nested = PriceSheet::Parse(deep, "deep.json");
  EXPECT_NE(nested.status().message().find("got an array of 1"), std::string::npos)
      << nested.status().ToString();
  EXPECT_FALSE(PriceSheet::Parse("[1, 2]", "list.json").ok());
  EXPECT_TRUE(PriceSheet::Parse("{}", "empty.json").ok());
}

// Found by tests/fuzz/price_sheet_fuzz.cc (its seed crash-10e2d37b...): a number past any double
// made the JSON parser throw out_of_range, not parse_error, and that ended the process.
TEST(PriceSheetTest, ANumberPastAnyDoubleIsAnErrorNotACrash) {
  for (const std::string text : {"444444e241022444444e", R"({"m": {"input_cost_per_token": 1e999,
                                    "output_cost_per_token": 1}})"}) {
    auto sheet = PriceSheet::Parse(text, "huge.json");
    ASSERT_FALSE(sheet.ok()) << text;
    EXPECT_EQ(sheet.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(sheet.status().message().find("huge.json: not JSON"), std::string::npos)
        << sheet.status().ToString();
  }
}

}  // namespace
}  // namespace pdserve::ledger
