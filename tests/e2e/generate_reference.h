// For the end-to-end tests: what every serving setup must match token for token, `pdserve
// generate` on the same model and prompt, checked on plain and streamed completions.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/e2e/curl.h"
#include "tests/e2e/pdserve_process.h"

namespace pdserve::testing {

// The body of a greedy streamed completion of `max_tokens` tokens (end-of-sequence ignored, usage
// asked for).
inline std::string GreedyStreamBody(const std::string& model, const std::string& prompt,
                                    int max_tokens) {
  return nlohmann::json{{"model", model},
                        {"prompt", prompt},
                        {"max_tokens", max_tokens},
                        {"temperature", 0},
                        {"ignore_eos", true},
                        {"stream", true},
                        {"stream_options", {{"include_usage", true}}}}
      .dump();
}

// Expects the SSE stream `sse` (of GreedyStreamBody) to have ended with [DONE], without an error
// event, with `max_tokens` tokens whose text is `pdserve generate`'s for the same prompt
// (`generate_args`: "--model DIR --prompt P"; one thread, like the workers of the tests).
inline void ExpectStreamMatchesGenerate(const std::string& sse, int max_tokens,
                                        const std::string& generate_args) {
  int tokens = 0;
  bool done = false;
  const std::string text = StreamedText(sse, &tokens, &done);
  EXPECT_EQ(sse.find("data: {\"error\""), std::string::npos) << sse.substr(0, 300);
  EXPECT_TRUE(done);
  EXPECT_EQ(tokens, max_tokens);
  const auto reference =
      nlohmann::json::parse(RunPdserve("generate --json --ignore-eos --threads 1 --max-tokens " +
                                       std::to_string(max_tokens) + " " + generate_args),
                            nullptr, false);
  ASSERT_TRUE(reference.is_object()) << generate_args;
  EXPECT_TRUE(text == reference["text"].get<std::string>()) << "differs from pdserve generate";
}

// Sends `prompt` greedily for 12 tokens through the gateway on `http_port`, plain and streamed,
// and expects the token ids (return_token_ids), the text and the token counts of `pdserve
// generate` on `model`: the reference every serving setup must match token for token
// (`generate_flags`: e.g. the workers' --device). Returns the streamed response's body.
inline std::string ExpectGreedyMatchesGenerate(int http_port, const std::string& model,
                                               const std::string& prompt,
                                               const std::string& generate_flags = "") {
  const PdserveRun generated =
      RunPdserveWithOutput("generate --json --ignore-eos --max-tokens 12 --threads 1 --model " +
                           model + " --prompt '" + prompt + "' " + generate_flags);
  auto reference = nlohmann::json::parse(generated.out, nullptr, false);
  EXPECT_EQ(generated.exit_code, 0) << generated.out << generated.err;
  EXPECT_TRUE(reference.is_object()) << generated.out << generated.err;
  if (generated.exit_code != 0 || !reference.is_object()) return "";
  const std::vector<int32_t> want = reference["tokens"];
  EXPECT_EQ(want.size(), 12u) << generated.out;
  const nlohmann::json body = {{"model", "tiny"},    {"prompt", prompt},
                               {"max_tokens", 12},   {"temperature", 0},
                               {"ignore_eos", true}, {"return_token_ids", true}};
  auto plain = Curl(http_port, "/v1/completions", body.dump());
  EXPECT_EQ(plain.status, 200) << plain.body;
  if (plain.status != 200) return "";
  auto j = nlohmann::json::parse(plain.body);
  const auto& choice = j["choices"][0];
  EXPECT_EQ(choice["token_ids"].get<std::vector<int32_t>>(), want) << prompt;
  EXPECT_EQ(choice["prompt_token_ids"].size(), reference["prompt_tokens"].get<size_t>());
  EXPECT_EQ(choice["text"], reference["text"]) << prompt;
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_EQ(j["usage"]["prompt_tokens"], reference["prompt_tokens"]);

  nlohmann::json streamed_body = body;
  streamed_body["stream"] = true;
  streamed_body["stream_options"] = {{"include_usage", true}};
  auto streamed = Curl(http_port, "/v1/completions", streamed_body.dump());
  std::vector<int32_t> streamed_ids;
  for (size_t pos = 0; (pos = streamed.body.find("data: {", pos)) != std::string::npos; ++pos) {
    auto chunk = nlohmann::json::parse(
        streamed.body.substr(pos + 6, streamed.body.find("\n\n", pos) - pos - 6), nullptr, false);
    if (chunk.is_discarded() || !chunk.contains("choices") || chunk["choices"].empty()) continue;
    for (int32_t id : chunk["choices"][0].value("token_ids", std::vector<int32_t>{}))
      streamed_ids.push_back(id);
  }
  EXPECT_EQ(streamed_ids, want) << prompt;
  int tokens = 0;
  bool done = false;
  EXPECT_EQ(StreamedText(streamed.body, &tokens, &done), reference["text"]) << prompt;
  EXPECT_EQ(tokens, 12);
  EXPECT_TRUE(done);
  return streamed.body;
}

}  // namespace pdserve::testing
