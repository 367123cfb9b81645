// StepLog: the steps a worker writes read back as written, each with the time since the step
// before it ended, appended to what the file held, and a line that is not a step is refused with
// the file, the line and what is wrong.
#include "model/step_log.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "tests/temp_dir.h"

namespace pdserve::model {
namespace {

StepSample Prompt(int start, int tokens, double seconds) {
  StepSample s;
  AddPromptChunk(s.shape, start, tokens);
  s.seconds = seconds;
  return s;
}

StepSample Decode(std::vector<int> positions, double seconds) {
  StepSample s;
  for (int p : positions) AddDecodeToken(s.shape, p);
  s.seconds = seconds;
  return s;
}

void ExpectSame(const StepSample& a, const StepSample& b) {
  EXPECT_EQ(a.shape.prompt_tokens, b.shape.prompt_tokens);
  EXPECT_EQ(a.shape.prompt_attention, b.shape.prompt_attention);
  EXPECT_EQ(a.shape.decode_tokens, b.shape.decode_tokens);
  EXPECT_EQ(a.shape.decode_context, b.shape.decode_context);
  EXPECT_EQ(a.shape.max_context, b.shape.max_context);
  EXPECT_DOUBLE_EQ(a.seconds, b.seconds);
}

TEST(StepLog, StepsReadBackAsWrittenAndAReopenedLogAppends) {
  pdserve::testing::TempDir dir;
  const std::string path = dir / "steps.jsonl";
  const std::vector<StepSample> steps = {Prompt(0, 190, 0.2112), Decode({190, 63}, 0.0213),
                                         Prompt(16, 48, 0.5e-3)};
  using std::chrono::milliseconds;
  const auto t0 = StepLog::Clock::now();
  {
    auto log = StepLog::Open(path);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    (*log)->Write(steps[0], t0);
    // Began 3 ms after the first ended.
    (*log)->Write(steps[1], t0 + std::chrono::microseconds(211200) + milliseconds(3));
  }
  {
    auto log = StepLog::Open(path);  // a new writer: its first line has no gap
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    (*log)->Write(steps[2], t0 + milliseconds(500));
  }
  auto read = ReadStepLog(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), 3u);
  for (size_t i = 0; i < steps.size(); ++i) ExpectSame((*read)[i].step, steps[i]);
  EXPECT_EQ((*read)[0].gap_seconds, -1);
  EXPECT_NEAR((*read)[1].gap_seconds, 0.003, 1e-9);
  EXPECT_EQ((*read)[2].gap_seconds, -1);
}

TEST(StepLog, ALineThatIsNotAStepIsNamedWithItsFault) {
  pdserve::testing::TempDir dir;
  const std::string good =
      R"({"prompt_tokens":4,"prompt_attention":10,"decode_tokens":0,"decode_context":0,)"
      R"("max_context":4,"seconds":0.01})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "not a JSON object"},
      {R"({"prompt_tokens":4,"prompt_attention":10,"decode_tokens":0,"decode_context":0,)"
       R"("max_context":4})",
       "'seconds' must be a number above 0"},
      {R"({"prompt_tokens":4,"prompt_attention":10,"decode_tokens":0,"decode_context":0,)"
       R"("max_context":4,"seconds":0})",
       "'seconds' must be a number above 0"},
      {R"({"prompt_tokens":-4,"prompt_attention":10,"decode_tokens":0,"decode_context":0,)"
       R"("max_context":4,"seconds":0.01})",
       "'prompt_tokens' must be a whole number of at least 0"},
      {R"({"prompt_tokens":4,"prompt_attention":10,"decode_tokens":"2","decode_context":0,)"
       R"("max_context":4,"seconds":0.01})",
       "'decode_tokens' must be a whole number of at least 0"},
      {R"({"prompt_tokens":4,"prompt_attention":10,"decode_tokens":0,"decode_context":0,)"
       R"("max_context":4,"seconds":0.01,"gap_seconds":-1})",
       "'gap_seconds' must be a number of at least 0"},
  };
  for (const auto& [line, fault] : cases) {
    const std::string path = dir / "bad.jsonl";
    std::ofstream(path) << good << "\n\n" << line << "\n";
    auto read = ReadStepLog(path);
    ASSERT_FALSE(read.ok()) << line;
    EXPECT_EQ(read.status().message(), path + ":3: " + fault) << line;
  }
  EXPECT_EQ(ReadStepLog(dir / "missing.jsonl").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(StepLog::Open(dir / "no-such-folder/steps.jsonl").ok());
}

}  // namespace
}  // namespace pdserve::model
