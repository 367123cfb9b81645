// `pdserve make-model` and `pdserve generate` as a user runs them: real processes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/command_run.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using model::testing::TempDir;

using pdserve::testing::CommandRun;
using pdserve::testing::Pdserve;
using pdserve::testing::ReadFile;

TEST(MakeModelCommandTest, SameSeedWritesTheSameModel) {
  TempDir dir;
  ASSERT_EQ(Pdserve("make-model --preset tiny --seed 3 --out " + (dir / "a")).exit_code, 0);
  ASSERT_EQ(Pdserve("make-model --preset tiny --seed 3 --out " + (dir / "b")).exit_code, 0);
  ASSERT_EQ(Pdserve("make-model --preset tiny --seed 4 --out " + (dir / "c")).exit_code, 0);
  const std::string a = ReadFile(dir / "a/model.safetensors");
  EXPECT_GT(a.size(), 3'000'000u);  // about 1M parameters in f32
  EXPECT_EQ(a, ReadFile(dir / "b/model.safetensors"));
  EXPECT_NE(a, ReadFile(dir / "c/model.safetensors"));
  for (const char* f :
       {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    EXPECT_TRUE(std::filesystem::exists(dir / (std::string("a/") + f))) << f;
  }
}

TEST(GenerateCommandTest, GreedyIsDeterministicAndHonoursMaxTokens) {
  TempDir dir;
  ASSERT_EQ(Pdserve("make-model --preset tiny --out " + dir.path()).exit_code, 0);
  const std::string args = "generate --json --max-tokens 9 --ignore-eos --model " + dir.path() +
                           " --prompt 'Once upon a time'";
  CommandRun a = Pdserve(args), b = Pdserve(args);
  ASSERT_EQ(a.exit_code, 0) << a.out;
  EXPECT_EQ(a.out, b.out);
  auto j = nlohmann::json::parse(a.out);
  EXPECT_EQ(j["tokens"].size(), 9u);
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_GT(j["prompt_tokens"].get<int>(), 1);

  // Sharded bf16 weights of the same seed load and generate too.
  ASSERT_EQ(
      Pdserve("make-model --preset tiny --dtype bf16 --shards 2 --out " + (dir / "bf16")).exit_code,
      0);
  CommandRun c =
      Pdserve("generate --json --max-tokens 4 --model " + (dir / "bf16") + " --prompt hi --chat");
  ASSERT_EQ(c.exit_code, 0) << c.out;
}

TEST(GenerateCommandTest, BrokenModelDirectoryIsAClearErrorNotACrash) {
  TempDir dir;
  CommandRun none = Pdserve("generate --model " + (dir / "nope") + " --prompt x");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.out.find("config.json"), std::string::npos) << none.out;

  ASSERT_EQ(Pdserve("make-model --out " + dir.path()).exit_code, 0);
  std::filesystem::resize_file(dir / "model.safetensors", 100000);
  CommandRun truncated = Pdserve("generate --model " + dir.path() + " --prompt x");
  EXPECT_EQ(truncated.exit_code, 1);
  EXPECT_NE(truncated.out.find("truncated"), std::string::npos) << truncated.out;
  EXPECT_NE(truncated.out.find("model.safetensors: tensor '"), std::string::npos) << truncated.out;
}

}  // namespace
}  // namespace pdserve
