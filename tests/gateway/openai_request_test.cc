#include "gateway/openai_request.h"

#include <gtest/gtest.h>

namespace pdserve::gateway {
namespace {

GenerationRequest Ok(std::string_view body, Endpoint e = Endpoint::kCompletions) {
  auto r = ParseGenerationRequest(body, e);
  if (auto* err = std::get_if<ApiError>(&r)) ADD_FAILURE() << err->message;
  return std::holds_alternative<GenerationRequest>(r) ? std::get<GenerationRequest>(r)
                                                      : GenerationRequest{};
}

ApiError Bad(std::string_view body, Endpoint e = Endpoint::kCompletions) {
  auto r = ParseGenerationRequest(body, e);
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(OpenAiRequestTest, ParsesACompletionWithEveryField) {
  auto r = Ok(R"({"model":"m","prompt":"hi","max_tokens":7,"temperature":0,"top_p":0.5,"seed":3,
                 "stop":["a","b"],"stream":true,"stream_options":{"include_usage":true},
                 "ignore_eos":true,"top_k":5,"user":"alice","n":3,
                 "return_token_ids":true})");
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(Ok(R"({"model":"m","prompt":"hi"})").n, 1);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt, "hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.temperature, 0.0f);
  EXPECT_EQ(r.top_p, 0.5f);
  EXPECT_EQ(r.seed, 3u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_TRUE(r.return_token_ids);
  EXPECT_FALSE(Ok(R"({"model":"m","prompt":"hi"})").return_token_ids);
  EXPECT_EQ(r.top_k, 5);
  EXPECT_EQ(r.user, "alice");
}

TEST(OpenAiRequestTest, AcceptsTokenIdPromptsAndSinglePromptLists) {
  EXPECT_EQ(Ok(R"({"model":"m","prompt":[1,2,3]})").prompt_token_ids,
            (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(Ok(R"({"model":"m","prompt":[[4,5]]})").prompt_token_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(Ok(R"({"model":"m","prompt":["x"]})").prompt, "x");
  EXPECT_EQ(Ok(R"({"model":"m","prompt":"x","max_completion_tokens":3})").max_tokens, 3);
}

TEST(OpenAiRequestTest, ParsesChatMessagesWithTextParts) {
  auto r = Ok(R"({"model":"m","messages":[{"role":"system","content":"be brief"},
                 {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})",
              Endpoint::kChatCompletions);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "ab");
}

TEST(OpenAiRequestTest, EachBadFieldIsNamed) {
  struct Case {
    const char* body;
    const char* param;
    const char* says;
  };
  const Case cases[] = {
      {R"({"prompt":"x"})", "model", "'model' is required"},
      {R"({"model":3,"prompt":"x"})", "model", "must be a string"},
      {R"({"model":"m"})", "prompt", "'prompt' is required"},
      {R"({"model":"m","prompt":{}})", "prompt", "string or an array of token ids"},
      {R"({"model":"m","prompt":["a","b"]})", "prompt", "several prompts"},
      {R"({"model":"m","prompt":"x","max_tokens":0})", "max_tokens", "between 1"},
      {R"({"model":"m","prompt":"x","max_tokens":"5"})", "max_tokens", "must be an integer"},
      {R"({"model":"m","prompt":"x","max_tokens":[[7]]})", "max_tokens", "got an array of 1"},
      {R"({"model":"m","prompt":"x","temperature":3})", "temperature", "between"},
      {R"({"model":"m","prompt":"x","top_p":0})", "top_p", "greater than 0"},
      {R"({"model":"m","prompt":"x","n":0})", "n", "between 1 and 128"},
      {R"({"model":"m","prompt":"x","n":129})", "n", "between 1 and 128"},
      {R"({"model":"m","prompt":"x","stop":[1]})", "stop", "array of strings"},
      {R"({"model":"m","prompt":"x","stop":["a","b","c","d","e"]})", "stop", "more than 4"},
      {R"({"model":"m","prompt":"x","stream":"yes"})", "stream", "must be a boolean"},
      {R"({"model":"m","prompt":"x","return_token_ids":1})", "return_token_ids",
       "must be a boolean"},
      {R"({"model":"m","prompt":"x","stream_options":{"include_usage":true}})", "stream_options",
       "only allowed"},
  };
  for (const auto& c : cases) {
    ApiError e = Bad(c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << c.body << " -> " << e.message;
  }
  ApiError chat = Bad(R"({"model":"m","messages":[{"role":"robot","content":"x"}]})",
                      Endpoint::kChatCompletions);
  EXPECT_NE(chat.message.find("messages[0].role"), std::string::npos) << chat.message;
  for (const char* part : {R"({"type":5,"text":"x"})", R"({"type":null,"text":"x"})",
                           R"({"type":["text"],"text":"x"})", R"({"type":"text","text":5})"}) {
    const std::string body =
        std::string(R"({"model":"m","messages":[{"role":"user","content":[)") + part + "]}]}";
    EXPECT_EQ(Bad(body, Endpoint::kChatCompletions).param, "messages") << body;
  }
  const std::string deep = std::string(R"({"model":"m","prompt":"x","max_tokens":)") +
                           std::string(100000, '[') + "1" + std::string(100000, ']') + "}";
  EXPECT_NE(Bad(deep).message.find("more than 64 deep"), std::string::npos);
  EXPECT_EQ(Bad("{not json").message, "The request body is not valid JSON");
  EXPECT_EQ(Bad("[1]").message, "The request body must be a JSON object");
}

// Fields that would change the answer, which pdserve does not do, are refused by name rather
// than silently ignored; their "off" values pass.
TEST(OpenAiRequestTest, UnsupportedFieldsThatChangeTheAnswerAreRefusedByName) {
  const char* base = R"("model":"m","prompt":"hi")";
  for (const std::string field : {R"("best_of":3)", R"("suffix":"end")",
                                  R"("functions":[{"name":"f"}])", R"("function_call":"auto")"}) {
    const ApiError e = Bad("{" + std::string(base) + "," + field + "}");
    const std::string name = field.substr(1, field.find('"', 1) - 1);
    EXPECT_EQ(e.http_status, 400) << field;
    EXPECT_EQ(e.param, name) << field;
    EXPECT_NE(e.message.find("'" + name + "' is not supported"), std::string::npos) << e.message;
  }
  for (const std::string field :
       {R"("logprobs":false)", R"("logprobs":null)", R"("logprobs":0)", R"("echo":false)",
        R"("best_of":1)", R"("suffix":"")", R"("logit_bias":{})", R"("tools":[])",
        R"("tool_choice":"none")", R"("response_format":{"type":"text"})"}) {
    Ok("{" + std::string(base) + "," + field + "}");
  }
}

TEST(OpenAiRequestTest, EchoIsForCompletions) {
  EXPECT_TRUE(Ok(R"({"model":"m","prompt":"hi","echo":true,"logprobs":2})").echo);
  EXPECT_FALSE(Ok(R"({"model":"m","prompt":"hi","echo":false})").echo);
  EXPECT_EQ(Bad(R"({"model":"m","prompt":"hi","echo":"yes"})").param, "echo");
  const ApiError chat = Bad(R"({"model":"m","messages":[{"role":"user","content":"hi"}],)"
                            R"("echo":true})",
                            Endpoint::kChatCompletions);
  EXPECT_EQ(chat.param, "echo");
  EXPECT_NE(chat.message.find("chat completions do not echo"), std::string::npos) << chat.message;
}

TEST(OpenAiRequestTest, LogprobsAsEachEndpointSpellsThem) {
  const char* chat = R"({"model":"m","messages":[{"role":"user","content":"hi"}]})";
  auto with = [](const char* body, const std::string& fields) {
    std::string b(body);
    return b.substr(0, b.size() - 1) + "," + fields + "}";
  };
  const auto c = Endpoint::kChatCompletions;
  EXPECT_EQ(Ok(chat, c).logprobs, -1);
  EXPECT_EQ(Ok(with(chat, R"("logprobs":true)"), c).logprobs, 0);
  EXPECT_EQ(Ok(with(chat, R"("logprobs":true,"top_logprobs":20)"), c).logprobs, 20);
  EXPECT_EQ(Ok(with(chat, R"("logprobs":false)"), c).logprobs, -1);
  EXPECT_EQ(Bad(with(chat, R"("top_logprobs":2)"), c).param, "top_logprobs");
  EXPECT_EQ(Bad(with(chat, R"("logprobs":true,"top_logprobs":21)"), c).param, "top_logprobs");
  EXPECT_EQ(Bad(with(chat, R"("logprobs":3)"), c).message, "'logprobs' must be a boolean");
  const char* completion = R"({"model":"m","prompt":"hi"})";
  EXPECT_EQ(Ok(completion).logprobs, -1);
  EXPECT_EQ(Ok(with(completion, R"("logprobs":0)")).logprobs, 0);
  EXPECT_EQ(Ok(with(completion, R"("logprobs":5)")).logprobs, 5);
  EXPECT_EQ(Ok(with(completion, R"("logprobs":null)")).logprobs, -1);
  EXPECT_EQ(Bad(with(completion, R"("logprobs":21)")).param, "logprobs");
}

TEST(OpenAiRequestTest, ToolsChoicesAndToolMessages) {
  ParseOptions o;
  o.tool_call_format = ToolCallFormat::kHermes;
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":)"
      R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}}}},)"
      R"({"type":"function","function":{"name":"get_time"}}])";
  const std::string messages =
      R"("messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,)"
      R"("tool_calls":[{"id":"c1","type":"function","function":{"name":"get_time","arguments":"{}"}}]},)"
      R"({"role":"tool","tool_call_id":"c1","content":"09:30"}])";
  auto parse = [&](const std::string& extra) {
    return ParseGenerationRequest(R"({"model":"m",)" + messages + "," + tools + extra + "}",
                                  Endpoint::kChatCompletions, o);
  };
  auto r = parse("");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r)) << std::get<ApiError>(r).message;
  const auto& req = std::get<GenerationRequest>(r);
  EXPECT_EQ(req.tool_choice, ToolChoice::kAuto);
  EXPECT_EQ(req.tool_call_format, ToolCallFormat::kHermes);
  ASSERT_EQ(req.tools.size(), 2u);
  EXPECT_EQ(req.tools[1].parameters, R"({"type":"object"})");
  EXPECT_LT(req.tools_json.find("zeta"), req.tools_json.find("alpha"));  // as sent
  EXPECT_TRUE(req.json_schema.empty());
  ASSERT_EQ(req.messages.size(), 3u);
  EXPECT_TRUE(req.messages[1].null_content);
  EXPECT_NE(req.messages[1].tool_calls_json.find("get_time"), std::string::npos);
  EXPECT_EQ(req.messages[2].tool_call_id, "c1");

  auto required = std::get<GenerationRequest>(parse(R"(,"tool_choice":"required")"));
  EXPECT_EQ(required.json_prefix, "<tool_call>\n");
  EXPECT_NE(required.json_schema.find("get_weather"), std::string::npos);
  auto named = std::get<GenerationRequest>(
      parse(R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}})"));
  EXPECT_EQ(named.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(named.json_schema.find("get_weather"), std::string::npos);
  EXPECT_EQ(std::get<GenerationRequest>(parse(R"(,"tool_choice":"none")")).tool_call_format,
            ToolCallFormat::kNone);

  auto error = [&](const std::string& extra) {
    auto e = parse(extra);
    EXPECT_TRUE(std::holds_alternative<ApiError>(e)) << extra;
    return std::holds_alternative<ApiError>(e) ? std::get<ApiError>(e) : ApiError{};
  };
  EXPECT_EQ(error(R"(,"tool_choice":{"type":"function","function":{"name":"nope"}})").param,
            "tool_choice");
  EXPECT_EQ(error(R"(,"tool_choice":"sometimes")").param, "tool_choice");
  EXPECT_EQ(error(R"(,"tool_choice":"required","response_format":{"type":"json_object"})").param,
            "tool_choice");
  o.tool_call_format = ToolCallFormat::kNone;
  EXPECT_NE(error(R"(,"tool_choice":"required")").message.find("no tool-call syntax"),
            std::string::npos);
  const ApiError bad_tool = Bad(R"({"model":"m","messages":[{"role":"user","content":"x"}],)"
                                R"("tools":[{"type":"function","function":{"name":"a b"}}]})",
                                Endpoint::kChatCompletions);
  EXPECT_EQ(bad_tool.param, "tools");
  const ApiError bad_tool_message = Bad(
      R"({"model":"m","messages":[{"role":"tool","content":"x"}]})", Endpoint::kChatCompletions);
  EXPECT_NE(bad_tool_message.message.find("tool_call_id"), std::string::npos);
}

TEST(OpenAiRequestTest, LogitBiasNamesTokensOfTheVocabulary) {
  ParseOptions o;
  o.vocab_size = 100;
  auto parse = [&](const std::string& bias) {
    return ParseGenerationRequest(R"({"model":"m","prompt":"hi","logit_bias":)" + bias + "}",
                                  Endpoint::kCompletions, o);
  };
  auto ok = parse(R"({"5":100,"99":-100,"7":0.5})");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(ok));
  EXPECT_EQ(std::get<GenerationRequest>(ok).logit_bias.size(), 3u);
  for (const std::string bad : {R"({"100":1})", R"({"-1":1})", R"({"x":1})", R"({"5":101})",
                                R"({"5":"1"})", R"({"5":1,"05":2})", R"([1])"}) {
    auto r = parse(bad);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << bad;
    EXPECT_EQ(std::get<ApiError>(r).param, "logit_bias") << bad;
  }
  EXPECT_NE(std::get<ApiError>(parse(R"({"100":1})")).message.find("0 to 99"), std::string::npos);
}

TEST(OpenAiRequestTest, ResponseFormatsBecomeACompiledSchemaInTheirKeysOrder) {
  EXPECT_EQ(Ok(R"({"model":"m","prompt":"hi","response_format":{"type":"text"}})").json_schema, "");
  EXPECT_EQ(
      Ok(R"({"model":"m","prompt":"hi","response_format":{"type":"json_object"}})").json_schema,
      R"({"type":"object"})");
  const auto r = Ok(R"({"model":"m","messages":[{"role":"user","content":"hi"}],
      "response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,
        "schema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}},
                  "required":["zeta","alpha"],"additionalProperties":false}}}})",
                    Endpoint::kChatCompletions);
  // zeta before alpha, as sent (a sorted parse would have put alpha first).
  EXPECT_EQ(
      r.json_schema,
      R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}},)"
      R"("required":["zeta","alpha"],"additionalProperties":false})");
}

TEST(OpenAiRequestTest, ResponseFormatsTheEngineCannotEnforceAreRefusedSayingWhy) {
  const std::string base = R"({"model":"m","prompt":"hi","response_format":)";
  auto bad = [&](const std::string& format) { return Bad(base + format + "}"); };
  const ApiError pattern = bad(
      R"({"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object","properties":{"zip":{"type":"string","pattern":"[0-9]+"}}}}})");
  EXPECT_EQ(pattern.param, "response_format");
  EXPECT_EQ(pattern.message,
            "'response_format.json_schema.schema': unsupported JSON Schema keyword 'pattern' at "
            "/properties/zip");
  EXPECT_NE(bad(R"({"type":"xml"})").message.find("text, json_object or json_schema"),
            std::string::npos);
  EXPECT_NE(bad(R"("json")").message.find("must be an object"), std::string::npos);
  EXPECT_NE(bad(R"({"type":"json_schema"})").message.find("'name' and 'schema'"),
            std::string::npos);
  EXPECT_NE(bad(R"({"type":"json_schema","json_schema":{"schema":{}}})").message.find("name"),
            std::string::npos);
  EXPECT_NE(bad(R"({"type":"json_schema","json_schema":{"name":"p","schema":{"$ref":"#"}}})")
                .message.find("refers to itself"),
            std::string::npos);
}

// Integers past int64 (JSON has no bound) are reported as sent, not wrapped to -1.
TEST(OpenAiRequestTest, IntegersPastInt64AreReportedAsSent) {
  const ApiError e = Bad(R"({"model":"m","prompt":"hi","max_tokens":18446744073709551615})");
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_NE(e.message.find("got 18446744073709551615"), std::string::npos) << e.message;
  EXPECT_EQ(e.message.find("-1"), std::string::npos) << e.message;
  // A seed is 64 bits either way: an unsigned one is taken as it is.
  EXPECT_EQ(Ok(R"({"model":"m","prompt":"hi","seed":18446744073709551615})").seed,
            std::optional<uint64_t>(UINT64_MAX));
}

// A model's generation_config.json sets what a request leaves out; what it sends wins.
TEST(OpenAiRequestTest, SamplingDefaultsFillOnlyWhatTheRequestLeavesOut) {
  ParseOptions options;
  options.sampling = {0.6f, 0.95f, 20, 512};
  auto fill =
      ParseGenerationRequest(R"({"model":"m","prompt":"hi"})", Endpoint::kCompletions, options);
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(fill));
  const auto& filled = std::get<GenerationRequest>(fill);
  EXPECT_EQ(filled.temperature, 0.6f);
  EXPECT_EQ(filled.top_p, 0.95f);
  EXPECT_EQ(filled.top_k, 20);
  EXPECT_EQ(filled.max_tokens, 512);
  auto own = ParseGenerationRequest(
      R"({"model":"m","prompt":"hi","temperature":0,"top_p":1,"top_k":-1,"max_tokens":3})",
      Endpoint::kCompletions, options);
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(own));
  const auto& sent = std::get<GenerationRequest>(own);
  EXPECT_EQ(sent.temperature, 0.0f);
  EXPECT_EQ(sent.top_p, 1.0f);
  EXPECT_EQ(sent.top_k, 0);
  EXPECT_EQ(sent.max_tokens, 3);
  // Without a model's defaults: OpenAI's.
  const auto plain = Ok(R"({"model":"m","prompt":"hi"})");
  EXPECT_EQ(plain.temperature, 1.0f);
  EXPECT_EQ(plain.top_p, 1.0f);
  EXPECT_EQ(plain.top_k, 0);
  EXPECT_FALSE(plain.max_tokens.has_value());
}

TEST(ApiErrorTest, SerialisesAsOpenAiDoes) {
  auto j = ApiError::ModelNotFound("gpt-x").ToJson();
  EXPECT_EQ(j["error"]["message"], "The model 'gpt-x' does not exist");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "model");
  EXPECT_EQ(j["error"]["code"], "model_not_found");
  EXPECT_TRUE(ApiError::Internal("x").ToJson()["error"]["param"].is_null());
}

}  // namespace
}  // namespace pdserve::gateway
