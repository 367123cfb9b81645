// The engine under a response format: whatever random weights choose, the text parses and
// validates against the schema (checked here by a validator of the test's own, not the grammar).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "model/engine.h"
#include "model/model_maker.h"
#include "tests/temp_dir.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::model {
namespace {

using json = nlohmann::json;

// JSON Schema's meaning for the keywords the grammar supports.
bool Valid(const json& v, const json& schema, const json& root) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("$ref")) {
    return Valid(v, root.at(json::json_pointer(schema["$ref"].get<std::string>().substr(1))), root);
  }
  if (schema.contains("anyOf")) {
    for (const json& s : schema["anyOf"]) {
      if (Valid(v, s, root)) return true;
    }
    return false;
  }
  if (schema.contains("const") && v != schema["const"]) return false;
  if (schema.contains("enum") &&
      std::find(schema["enum"].begin(), schema["enum"].end(), v) == schema["enum"].end()) {
    return false;
  }
  if (schema.contains("type")) {
    std::vector<std::string> types;
    if (schema["type"].is_string()) {
      types.push_back(schema["type"]);
    } else {
      types = schema["type"].get<std::vector<std::string>>();
    }
    auto is = [&](const std::string& t) {
      if (t == "object") return v.is_object();
      if (t == "array") return v.is_array();
      if (t == "string") return v.is_string();
      if (t == "integer") return v.is_number_integer();
      if (t == "number") return v.is_number();
      if (t == "boolean") return v.is_boolean();
      if (t == "null") return v.is_null();
      return false;
    };
    if (std::none_of(types.begin(), types.end(), is)) return false;
  }
  if (v.is_object()) {
    for (const json& name : schema.value("required", json::array())) {
      if (!v.contains(name.get<std::string>())) return false;
    }
    const json properties = schema.value("properties", json::object());
    for (const auto& [key, value] : v.items()) {
      if (properties.contains(key)) {
        if (!Valid(value, properties[key], root)) return false;
      } else if (schema.contains("additionalProperties") &&
                 !Valid(value, schema["additionalProperties"], root)) {
        return false;
      }
    }
  }
  if (v.is_string()) {
    const std::string& text = v.get_ref<const std::string&>();
    // Code points: every byte but UTF-8's continuation bytes starts one.
    const size_t chars = static_cast<size_t>(std::count_if(
        text.begin(), text.end(), [](char c) { return (static_cast<uint8_t>(c) & 0xC0) != 0x80; }));
    if (schema.contains("minLength") && chars < schema["minLength"].get<size_t>()) return false;
    if (schema.contains("maxLength") && chars > schema["maxLength"].get<size_t>()) return false;
  }
  if (v.is_array()) {
    if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>()) return false;
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) return false;
    for (const json& item : v) {
      if (schema.contains("items") && !Valid(item, schema["items"], root)) return false;
    }
  }
  return true;
}

// Nested, with every kind of value; its strings bounded (the tiny model's 768 tokens hold one
// with a quote, so random weights take hundreds of tokens to close a free string, thousands now
// and then: FreeStrings... below has a few).
constexpr char kNestedSchema[] = R"({
  "type": "object",
  "properties": {
    "id": {"type": "integer"},
    "name": {"type": "string", "minLength": 1, "maxLength": 20},
    "role": {"enum": ["admin", "user", "guest"]},
    "kind": {"const": "person"},
    "address": {"type": "object", "properties": {
        "zone": {"enum": [1, 12, "north"]}, "floor": {"type": ["integer", "null"]}},
      "required": ["zone", "floor"], "additionalProperties": false},
    "scores": {"type": "array", "items": {"type": "number"}, "maxItems": 3},
    "friends": {"type": "array", "items": {"$ref": "#/$defs/friend"}, "maxItems": 2},
    "active": {"type": "boolean"},
    "nickname": {"type": "null"}
  },
  "required": ["id", "name", "role", "kind", "address", "scores", "friends", "active"],
  "additionalProperties": false,
  "$defs": {"friend": {"type": "object", "properties": {
      "id": {"type": "integer"}, "best": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
      "note": {"type": ["string", "null"], "maxLength": 12}},
    "required": ["id", "best", "note"], "additionalProperties": false}}
})";

constexpr char kFreeStringsSchema[] = R"({"type": "object", "properties": {
  "name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
  "required": ["name", "tags"], "additionalProperties": false})";

class EngineGrammarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MakeModelOptions m;
    m.preset = "tiny";
    m.out_dir = dir_.path();
    ASSERT_TRUE(MakeModel(m).ok());
    auto t = tokenizer::Tokenizer::Load(dir_.path());
    ASSERT_TRUE(t.ok());
    tokenizer_ = *t;
    prompt_ = *tokenizer_->Encode("Describe a person as JSON:", true);
  }

  std::unique_ptr<Engine> Load() {
    EngineOptions o;
    o.threads = 1;
    o.kv_memory_mb = 64;
    auto e = Engine::Load(dir_.path(), o);
    EXPECT_TRUE(e.ok()) << e.status().message();
    return e.ok() ? std::move(*e) : nullptr;
  }

  // Runs every sequence to its end: the tokens and finish reason of each.
  static std::map<uint64_t, std::pair<std::vector<int32_t>, FinishReason>> RunAll(Engine& e) {
    std::map<uint64_t, std::pair<std::vector<int32_t>, FinishReason>> out;
    std::vector<TokenEvent> events;
    while (e.HasWork()) {
      events.clear();
      EXPECT_TRUE(e.Step(&events).ok());
      for (const auto& ev : events) {
        if (ev.token >= 0 && !ev.is_stop_token) out[ev.seq_id].first.push_back(ev.token);
        if (ev.finish != FinishReason::kNone) out[ev.seq_id].second = ev.finish;
      }
    }
    return out;
  }

  // Adds `seeds` sampled sequences under `schema`: the seed of each sequence id.
  std::map<uint64_t, uint64_t> AddSeeds(Engine& e, const json& schema, uint64_t seeds,
                                        int max_tokens) {
    std::map<uint64_t, uint64_t> seed_of;
    for (uint64_t seed = 1; seed <= seeds; ++seed) {
      SamplingParams p;
      p.temperature = 1.0f;
      p.seed = seed;
      p.max_tokens = max_tokens;
      p.json_schema = schema.dump();
      auto id = e.Add(prompt_, p);
      EXPECT_TRUE(id.ok()) << id.status().message();
      if (id.ok()) seed_of[*id] = seed;
    }
    return seed_of;
  }

  // Expects a sequence's text to have ended by itself and to parse and validate: the text.
  std::string ExpectValid(const std::pair<std::vector<int32_t>, FinishReason>& result,
                          const json& schema, const std::string& label) {
    const std::string text = tokenizer_->Decode(result.first, /*skip_special=*/true);
    EXPECT_EQ(result.second, FinishReason::kStop) << label << ": " << text;
    const json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(value.is_discarded()) << label << ": " << text;
    if (!value.is_discarded()) EXPECT_TRUE(Valid(value, schema, schema)) << label << ": " << text;
    return text;
  }

  ::pdserve::testing::TempDir dir_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  std::vector<int32_t> prompt_;
};

TEST_F(EngineGrammarTest, SampledOutputIsValidForANestedSchemaOnEverySeed) {
  auto e = Load();
  ASSERT_TRUE(e);
  const json schema = json::parse(kNestedSchema);
  const auto seed_of = AddSeeds(*e, schema, 100, 1000);
  const auto results = RunAll(*e);
  ASSERT_EQ(results.size(), 100u);
  std::set<std::string> texts;
  for (const auto& [id, result] : results) {
    texts.insert(ExpectValid(result, schema, "seed " + std::to_string(seed_of.at(id))));
  }
  EXPECT_GT(texts.size(), 90u);  // the seeds chose differently
  ASSERT_NE(e->grammar_plans(), nullptr);
}

TEST_F(EngineGrammarTest, FreeStringsCloseAndStayValidUtf8) {
  auto e = Load();
  ASSERT_TRUE(e);
  const json schema = json::parse(kFreeStringsSchema);
  AddSeeds(*e, schema, 4, 8000);
  for (const auto& [id, result] : RunAll(*e)) {
    const std::string text = ExpectValid(result, schema, "free strings");
    EXPECT_EQ(text.find("\xEF\xBF\xBD"), std::string::npos);  // no U+FFFD from a cut character
  }
}

TEST_F(EngineGrammarTest, GreedyJsonObjectIsAnObjectAndEndsItself) {
  auto e = Load();
  ASSERT_TRUE(e);
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 1000;
  p.json_schema = R"({"type":"object"})";
  ASSERT_TRUE(e->Add(prompt_, p).ok());
  const auto results = RunAll(*e);
  ASSERT_EQ(results.size(), 1u);
  const auto& [tokens, finish] = results.begin()->second;
  const std::string text = tokenizer_->Decode(tokens, true);
  if (finish == FinishReason::kStop) {
    const json value = json::parse(text, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << text;
    EXPECT_TRUE(value.is_object()) << text;
  } else {
    // Greedy may loop inside a string forever: then it is cut at max_tokens, a prefix of JSON.
    EXPECT_EQ(finish, FinishReason::kLength);
    EXPECT_EQ(tokens.size(), 1000u);
    EXPECT_EQ(text[0], '{');
  }
}

TEST_F(EngineGrammarTest, AResumedOrHandedOverSequenceGoesOnAsIfNeverMoved) {
  const std::string schema = json::parse(kNestedSchema).dump();
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  p.max_tokens = 1000;
  p.json_schema = schema;
  auto whole = Load();
  ASSERT_TRUE(whole->Add(prompt_, p).ok());
  const std::vector<int32_t> expected = RunAll(*whole).begin()->second.first;
  ASSERT_GT(expected.size(), 12u);

  // Resumed after 10 tokens: they are prompt now, and samples_drawn says so.
  auto resumed = Load();
  std::vector<int32_t> prompt = prompt_;
  prompt.insert(prompt.end(), expected.begin(), expected.begin() + 10);
  SamplingParams rest = p;
  rest.samples_drawn = 10;
  rest.max_tokens = p.max_tokens - 10;
  ASSERT_TRUE(resumed->Add(prompt, rest).ok());
  std::vector<int32_t> got(expected.begin(), expected.begin() + 10);
  const auto tail = RunAll(*resumed).begin()->second.first;
  got.insert(got.end(), tail.begin(), tail.end());
  EXPECT_EQ(got, expected);

  // Tokens the schema does not admit are refused with a reason.
  auto wrong = Load();
  std::vector<int32_t> bad_prompt = prompt_;
  const auto bad = *tokenizer_->Encode("[1]", false);
  bad_prompt.insert(bad_prompt.end(), bad.begin(), bad.end());
  SamplingParams bad_params = p;
  bad_params.samples_drawn = static_cast<int>(bad.size());
  auto refused = wrong->Add(bad_prompt, bad_params);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("do not follow the response format"),
            std::string::npos);
}

TEST_F(EngineGrammarTest, ASchemaItCannotEnforceIsRefused) {
  auto e = Load();
  SamplingParams p;
  p.json_schema = R"({"type":"string","pattern":"a+"})";
  auto id = e->Add(prompt_, p);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(id.status().message().find("'pattern'"), std::string::npos);
}

}  // namespace
}  // namespace pdserve::model
