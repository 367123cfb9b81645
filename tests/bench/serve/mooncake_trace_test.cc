// Mooncake-trace replay: equal hash ids give equal text blocks, send offsets follow the scaled
// timestamps, the ideal cache counts the leading ids sent before, bad lines are named by file
// and line; and telling the dataset file formats apart by content.
#include "bench/serve/mooncake_trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace pdserve::bench {
namespace {

std::string WriteFile(const std::string& name, const std::string& text) {
  std::filesystem::create_directories(PDSERVE_TEST_TMP);
  std::string path = std::string(PDSERVE_TEST_TMP) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::vector<std::string> SplitWords(const std::string& text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    size_t space = text.find(' ', i);
    if (space == std::string::npos) space = text.size();
    words.push_back(text.substr(i, space - i));
    i = space + 1;
  }
  return words;
}

std::vector<std::string> Slice(const std::vector<std::string>& words, size_t from, size_t to) {
  return {words.begin() + static_cast<std::ptrdiff_t>(from),
          words.begin() + static_cast<std::ptrdiff_t>(to)};
}

TEST(MooncakeTrace, EqualHashIdsGiveEqualBlocksAndRequestsKeepTheirTimes) {
  // Out of order in the file: sent by timestamp. Request "b" shares block 1 with "a"; "c"
  // shares blocks 1 and 2 and adds 3, cut at 1100 tokens.
  std::string path = WriteFile(
      "trace.jsonl",
      R"({"timestamp": 3000, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]}

{"timestamp": 1000, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}
{"timestamp": 1500.5, "input_length": 700, "output_length": 4, "hash_ids": [1, 9]}
)");
  auto trace = LoadMooncakeTrace(path, {.max_requests = 10, .time_scale = 2.0}, nullptr);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->size(), 3u);
  const TraceRequest& a = (*trace)[0];
  const TraceRequest& b = (*trace)[1];
  const TraceRequest& c = (*trace)[2];
  EXPECT_DOUBLE_EQ(a.send_offset_s, 0);
  EXPECT_DOUBLE_EQ(b.send_offset_s, 1.001);  // 500.5 ms x 2
  EXPECT_DOUBLE_EQ(c.send_offset_s, 4.0);
  EXPECT_EQ(a.prompt.output_len, 3);
  EXPECT_EQ(c.prompt.output_len, 5);
  EXPECT_EQ(a.prompt.prompt_tokens, 600);
  auto wa = SplitWords(a.prompt.prompt), wb = SplitWords(b.prompt.prompt),
       wc = SplitWords(c.prompt.prompt);
  ASSERT_EQ(wa.size(), 600u);
  ASSERT_EQ(wb.size(), 700u);
  ASSERT_EQ(wc.size(), 1100u);
  EXPECT_EQ(Slice(wa, 0, 512), Slice(wb, 0, 512));      // id 1
  EXPECT_NE(Slice(wa, 512, 600), Slice(wb, 512, 600));  // ids 2 and 9
  EXPECT_EQ(Slice(wa, 0, 600), Slice(wc, 0, 600));      // ids 1, 2 (a has 2's first 88)
  EXPECT_EQ(MooncakeBlockText(2, 88),
            a.prompt.prompt.substr(a.prompt.prompt.size() - MooncakeBlockText(2, 88).size()));
  // The same id gives the same words on every load.
  EXPECT_EQ(MooncakeBlockText(7, 512), MooncakeBlockText(7, 512));
  EXPECT_NE(MooncakeBlockText(7, 512), MooncakeBlockText(8, 512));
  // Ideal: nothing before a; b's id 1 (512); c's id 1 and the part of id 2 that a sent, in whole
  // 16-token blocks.
  EXPECT_EQ(a.ideal_cached_tokens, 0);
  EXPECT_EQ(b.ideal_cached_tokens, 512);
  EXPECT_EQ(c.ideal_cached_tokens, 512 + 80);  // a sent only 88 words of block 2: 600 -> 592

  auto fixed = LoadMooncakeTrace(path, {.max_requests = 2, .fixed_output_len = 9}, nullptr);
  ASSERT_TRUE(fixed.ok());
  ASSERT_EQ(fixed->size(), 2u);  // the first two lines with a request
  EXPECT_EQ((*fixed)[1].prompt.output_len, 9);
  EXPECT_DOUBLE_EQ((*fixed)[1].send_offset_s, 2.0);
}

TEST(MooncakeTrace, BadLinesAreNamedByFileAndLine) {
  struct Case {
    const char* line;
    const char* why;
  } cases[] = {
      {"{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 2, \"hash_ids\": [1]", "JSON"},
      {R"({"input_length": 5, "output_length": 2, "hash_ids": [1]})", "timestamp"},
      {R"({"timestamp": -1, "input_length": 5, "output_length": 2, "hash_ids": [1]})", "timestamp"},
      {R"({"timestamp": 1, "input_length": 0, "output_length": 2, "hash_ids": [1]})",
       "input_length"},
      {R"({"timestamp": 1, "input_length": 5, "hash_ids": [1]})", "output_length"},
      {R"({"timestamp": 1, "input_length": 5, "output_length": 2})", "hash_ids"},
      {R"({"timestamp": 1, "input_length": 5, "output_length": 2, "hash_ids": [-3]})", "hash_ids"},
      {R"([1, 2])", "object"},
  };
  for (const Case& c : cases) {
    std::string path = WriteFile(
        "bad_trace.jsonl",
        std::string(R"({"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": [1]})") +
            "\n" + c.line + "\n");
    auto trace = LoadMooncakeTrace(path, {}, nullptr);
    ASSERT_FALSE(trace.ok()) << c.line;
    EXPECT_EQ(trace.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(trace.status().message().find(path + ":2:"), std::string::npos)
        << trace.status().message();
    EXPECT_NE(trace.status().message().find(c.why), std::string::npos) << trace.status().message();
  }
  EXPECT_EQ(LoadMooncakeTrace(WriteFile("empty_trace.jsonl", "\n\n"), {}, nullptr).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      LoadMooncakeTrace(std::string(PDSERVE_TEST_TMP) + "/none.jsonl", {}, nullptr).status().code(),
      StatusCode::kNotFound);
  std::string good =
      WriteFile("good_trace.jsonl",
                R"({"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": [1]})");
  EXPECT_FALSE(LoadMooncakeTrace(good, {.time_scale = 0}, nullptr).ok());
}

TEST(DatasetFormat, IsToldFromTheContent) {
  EXPECT_EQ(*DetectDatasetFormat(WriteFile("f1.json", "\n  [{\"conversations\": []}]")),
            "sharegpt");
  EXPECT_EQ(*DetectDatasetFormat(WriteFile(
                "f2.jsonl",
                R"({"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": []})")),
            "mooncake");
  EXPECT_EQ(*DetectDatasetFormat(WriteFile("f3.jsonl", "\n\"just a prompt\"\n")), "jsonl");
  EXPECT_EQ(*DetectDatasetFormat(WriteFile("f4.jsonl", R"({"prompt": "hi"})")), "jsonl");
  auto bad = DetectDatasetFormat(WriteFile("f5.txt", "\nplain text\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("f5.txt:2:"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(DetectDatasetFormat(WriteFile("f6.jsonl", "")).ok());
  EXPECT_EQ(DetectDatasetFormat(std::string(PDSERVE_TEST_TMP) + "/absent").status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace pdserve::bench
