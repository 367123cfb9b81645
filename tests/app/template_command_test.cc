// `pdserve template` as a user runs it: the prompt a made model's chat template renders, a
// chat_template.jinja beside it taking over, and the template's own errors.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/command_run.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using model::testing::TempDir;
using pdserve::testing::CommandRun;
using pdserve::testing::Pdserve;

TEST(TemplateCommandTest, PrintsTheRenderedPrompt) {
  TempDir dir;
  ASSERT_EQ(Pdserve("make-model --preset tiny --out " + dir.path()).exit_code, 0);
  std::ofstream(dir / "chat.json")
      << R"([{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi\n"}])";
  CommandRun run = Pdserve("template --model " + dir.path() + " --messages " + (dir / "chat.json"));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  // make-model writes Meta's Llama-3 template: content trimmed, the assistant header last.
  EXPECT_EQ(run.out,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // An object with "messages", from stdin, without the generation prompt.
  std::ofstream(dir / "request.json")
      << R"({"model": "tiny", "messages": [{"role": "developer", "content": "x"}]})";
  CommandRun object = Pdserve("template --no-generation-prompt --model " + dir.path() +
                              " --messages - < " + (dir / "request.json"));
  ASSERT_EQ(object.exit_code, 0) << object.out;
  EXPECT_EQ(object.out,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nx<|eot_id|>");
}

TEST(TemplateCommandTest, ChatTemplateJinjaAndItsErrors) {
  TempDir dir;
  ASSERT_EQ(Pdserve("make-model --preset tiny --out " + dir.path()).exit_code, 0);
  std::ofstream(dir / "chat_template.jinja")
      << "{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
         "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/"
         "...') }}{% endif %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
         "{% if add_generation_prompt %}[assistant] {% endif %}";
  std::ofstream(dir / "good.json")
      << R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])";
  CommandRun good =
      Pdserve("template --model " + dir.path() + " --messages " + (dir / "good.json"));
  ASSERT_EQ(good.exit_code, 0) << good.out;
  EXPECT_EQ(good.out, "[user] a\n[assistant] b\n[assistant] ");
  std::ofstream(dir / "bad.json")
      << R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])";
  CommandRun bad = Pdserve("template --model " + dir.path() + " --messages " + (dir / "bad.json"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("Conversation roles must alternate"), std::string::npos) << bad.out;
  std::ofstream(dir / "broken.json") << R"([{"role": "user"}])";
  CommandRun broken =
      Pdserve("template --model " + dir.path() + " --messages " + (dir / "broken.json"));
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_NE(broken.out.find("messages[0].content must be a string"), std::string::npos)
      << broken.out;
  // A template that does not parse is an error naming the file and the line.
  std::ofstream(dir / "chat_template.jinja", std::ios::trunc) << "a\n{% include 'x' %}";
  CommandRun unparsable =
      Pdserve("template --model " + dir.path() + " --messages " + (dir / "good.json"));
  EXPECT_EQ(unparsable.exit_code, 1);
  EXPECT_NE(unparsable.out.find("chat_template.jinja:2: the 'include' tag is not supported"),
            std::string::npos)
      << unparsable.out;
}

}  // namespace
}  // namespace pdserve
