// End to end: a model's own chat template in the gateway. A conversation the template refuses
// (its raise_exception) is a 400 carrying the template's message; one it accepts goes on to
// routing (503 here, with no worker, after the half-second queue timeout).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/e2e/process.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using testing::Curl;

TEST(ChatTemplateE2eTest, TemplateErrorsAre400WithTheTemplatesMessage) {
  model::testing::TempDir dir;
  const std::string model = testing::MakeTinyModel(dir.path());
  ASSERT_FALSE(model.empty()) << "make-model failed";
  std::ofstream(model + "/chat_template.jinja")
      << "{{ bos_token }}{% for m in messages %}"
         "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
         "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/"
         "...') }}{% endif %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
         "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
         "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
         "{% endif %}";
  auto gateway = testing::StartGateway(dir.path(), model, {"--queue-timeout", "0.5"});
  ASSERT_TRUE(gateway.process) << "gateway did not start";

  auto bad = Curl(gateway.http_port, "/v1/chat/completions",
                  R"({"model":"tiny","messages":[{"role":"user","content":"a"},)"
                  R"({"role":"user","content":"b"}]})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  auto error = nlohmann::json::parse(bad.body)["error"];
  EXPECT_EQ(error["message"],
            "Conversation roles must alternate user/assistant/user/assistant/...");
  EXPECT_EQ(error["param"], "messages");

  auto good = Curl(gateway.http_port, "/v1/chat/completions",
                   R"({"model":"tiny","messages":[{"role":"user","content":"a"}]})");
  EXPECT_EQ(good.status, 503) << good.body;  // past the template; no worker to route to
}

}  // namespace
}  // namespace pdserve
