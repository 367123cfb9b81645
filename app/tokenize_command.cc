// `pdserve tokenize`: encodes stdin to token ids (one JSON array per input line) or, with
// --decode, decodes such arrays back to text. With --json-lines each text line is a JSON string
// ("a\nb" in JSON escapes), which is how a text holding newlines or carriage returns is given;
// without it a text is the raw line, with its '\n' (and nothing else) removed.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/commands.h"
#include "common/json_text.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::app {
namespace {

struct TokenizeOptions {
  std::string tokenizer;
  bool add_special = false;
  bool decode = false;
  bool json_lines = false;
  bool skip_special = false;
};

[[noreturn]] void FailAtLine(size_t line_number, const std::string& message) {
  Fail("tokenize", InvalidArgument("line " + std::to_string(line_number) + ": " + message));
}

void EncodeLines(const tokenizer::Tokenizer& tokenizer, const TokenizeOptions& options) {
  std::string line;
  size_t line_number = 0;
  while (std::getline(std::cin, line)) {
    ++line_number;
    std::string text;
    if (options.json_lines) {
      try {
        nlohmann::json value = nlohmann::json::parse(line);
        if (!value.is_string()) FailAtLine(line_number, "expected a JSON string (--json-lines)");
        text = value.get<std::string>();
      } catch (const nlohmann::json::exception& e) {
        FailAtLine(line_number, std::string("not a JSON string: ") + e.what());
      }
    } else {
      text = std::move(line);
    }
    auto ids = tokenizer.Encode(text, options.add_special);
    if (!ids.ok()) FailAtLine(line_number, ids.status().ToString());
    std::cout << nlohmann::json(*ids).dump() << '\n';
  }
}

void DecodeLines(const tokenizer::Tokenizer& tokenizer, const TokenizeOptions& options) {
  std::string line;
  size_t line_number = 0;
  std::vector<int32_t> ids;
  while (std::getline(std::cin, line)) {
    ++line_number;
    ids.clear();
    try {
      nlohmann::json value = nlohmann::json::parse(line);
      if (!value.is_array()) FailAtLine(line_number, "expected a JSON array of token ids");
      for (const auto& id : value) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
            id.get<int64_t>() >= tokenizer.vocab_size()) {
          FailAtLine(line_number, "not a token id of this tokenizer: " + DescribeJson(id));
        }
        ids.push_back(id.get<int32_t>());
      }
    } catch (const nlohmann::json::exception& e) {
      FailAtLine(line_number, std::string("not a JSON array: ") + e.what());
    }
    std::string text = tokenizer.Decode(ids, options.skip_special);
    if (options.json_lines) {
      std::cout << DumpJson(nlohmann::json(text)) << '\n';  // ids may end mid-character
    } else {
      std::cout << text << '\n';
    }
  }
}

}  // namespace

void AddTokenizeCommand(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize",
      "Encode stdin lines to token ids (one JSON array per line), or decode id arrays to text");
  cmd->add_option("--tokenizer", options->tokenizer,
                  "tokenizer.json, or a model directory holding it (and tokenizer_config.json)")
      ->required();
  cmd->add_flag("--add-special", options->add_special,
                "let the post-processor add its tokens (BOS for Llama-3)");
  cmd->add_flag("--decode", options->decode,
                "read JSON arrays of ids, one per line, and print their text");
  cmd->add_flag("--json-lines", options->json_lines,
                "texts are JSON strings, one per line, so they can hold \\n and \\r (input when "
                "encoding, output when decoding)");
  cmd->add_flag("--skip-special", options->skip_special,
                "with --decode: leave special tokens out of the text");
  cmd->footer(
      "Input is read from stdin. Without --json-lines each line is one text, its trailing \\n\n"
      "removed (a \\r before it is kept); use --json-lines to pass texts holding newlines:\n"
      "  printf '%s\\n' '\"line one\\nline two\"' | pdserve tokenize --tokenizer DIR --json-lines");
  cmd->callback([options] {
    auto tokenizer = tokenizer::Tokenizer::Load(options->tokenizer);
    if (!tokenizer.ok()) {
      Fail("tokenize", tokenizer.status());
    }
    std::ios::sync_with_stdio(false);
    if (options->decode) {
      DecodeLines(**tokenizer, *options);
    } else {
      EncodeLines(**tokenizer, *options);
    }
    std::cout.flush();
    if (!std::cout) {
      Fail("tokenize", Unavailable("cannot write to stdout"));
    }
  });
}

}  // namespace pdserve::app
