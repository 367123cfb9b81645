#include "gateway/sampling_defaults.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/temp_dir.h"

namespace pdserve::gateway {
namespace {

TEST(SamplingDefaultsTest, ReadsTheFieldsAModelsAuthorsSet) {
  // Qwen3's generation_config.json.
  auto d = ParseSamplingDefaults(R"({"bos_token_id":151643,"do_sample":true,
      "eos_token_id":[151645,151643],"pad_token_id":151643,"temperature":0.6,"top_k":20,
      "top_p":0.95,"transformers_version":"4.51.0"})",
                                 "qwen3");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FLOAT_EQ(d->temperature, 0.6f);
  EXPECT_FLOAT_EQ(d->top_p, 0.95f);
  EXPECT_EQ(d->top_k, 20);
  EXPECT_FALSE(d->max_tokens.has_value());

  auto capped = ParseSamplingDefaults(R"({"max_new_tokens":256,"top_k":-1})", "f");
  ASSERT_TRUE(capped.ok()) << capped.status().ToString();
  EXPECT_EQ(capped->max_tokens, 256);
  EXPECT_EQ(capped->top_k, 0);
  EXPECT_FLOAT_EQ(capped->temperature, 1.0f);
  EXPECT_FLOAT_EQ(capped->top_p, 1.0f);
}

TEST(SamplingDefaultsTest, BadValuesNameTheFileAndField) {
  auto expect_error = [](const char* text, const std::string& says) {
    auto d = ParseSamplingDefaults(text, "m/generation_config.json");
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_NE(d.status().message().find(says), std::string::npos) << d.status().ToString();
    EXPECT_NE(d.status().message().find("m/generation_config.json"), std::string::npos);
  };
  expect_error(R"({"temperature":"hot"})", "'temperature' must be a number");
  expect_error(R"({"temperature":3})", "'temperature' is 3, outside [0, 2]");
  expect_error(R"({"top_p":0})", "'top_p' must be greater than 0");
  expect_error(R"({"top_k":2.5})", "'top_k' must be an integer");
  expect_error(R"({"max_new_tokens":0})", "'max_new_tokens' is 0");
  expect_error(R"([1])", "not a JSON object");
  expect_error(R"({"temperature":)", "not valid JSON");
}

TEST(SamplingDefaultsTest, AMissingFileGivesOpenAisDefaults) {
  pdserve::testing::TempDir dir;
  auto none = LoadSamplingDefaults(dir.path());
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FLOAT_EQ(none->temperature, 1.0f);
  std::ofstream(dir / "generation_config.json") << R"({"temperature":0.7})";
  auto file = LoadSamplingDefaults(dir.path());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_FLOAT_EQ(file->temperature, 0.7f);
}

}  // namespace
}  // namespace pdserve::gateway
