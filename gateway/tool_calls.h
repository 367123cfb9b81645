// Tool calls in a model's output, in the syntax of the families pdserve serves: Hermes-style
// `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks (Qwen2.5, Qwen3, Hermes),
// Llama 3.1/3.2's JSON `{"name": ..., "parameters": {...}}` (after <|python_tag|> or alone), and
// Mistral's `[TOOL_CALLS][{"name": ..., "arguments": {...}}]`. The format is recognised from the
// model's chat template. ParseToolCalls splits a whole output into content and calls;
// ToolCallSplitter holds back, while streaming, the text from where a call may begin;
// ToolChoiceGrammar is the constrained output that tool_choice "required" or a named function
// asks for. Pure functions and a per-request object; any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pdserve::gateway {

enum class ToolCallFormat { kNone, kHermes, kLlama3Json, kMistral };

// From a chat template's text: kNone where it shows no tool-call syntax.
ToolCallFormat DetectToolCallFormat(std::string_view chat_template);
// "hermes", "llama3_json", "mistral", "none".
const char* ToolCallFormatName(ToolCallFormat format);

struct ToolCall {
  std::string name;
  std::string arguments;  // compact JSON text of an object
};

struct ParsedOutput {
  std::string content;  // the text that is not a call
  std::vector<ToolCall> calls;
};

// The content and calls of a whole output. Text that does not hold a whole, well-formed call
// stays content, calls and all (as vLLM's parsers do).
ParsedOutput ParseToolCalls(ToolCallFormat format, std::string_view text);

class ToolCallSplitter {
 public:
  explicit ToolCallSplitter(ToolCallFormat format) : format_(format) {}
  // Appends output text; returns the content that is safe to stream now (none of it can be
  // the start of a call).
  std::string Push(std::string_view text);
  // At the end: the held-back text parsed (its content is still to be streamed).
  ParsedOutput Finish();
  bool holding() const { return !held_.empty(); }

 private:
  ToolCallFormat format_;
  std::string held_;
  bool calling_ = false;       // a call's start was seen: everything from it is held
  bool seen_content_ = false;  // Llama 3 JSON: a call must open the output
};

struct ToolSpec {
  std::string name;
  std::string parameters;  // compact JSON Schema text; {"type":"object"} where none was given
};

// What the engine constrains the output to where tool_choice is "required" (any of `tools`) or
// names one function (`tools` holds only it): one call in the format's syntax, its arguments
// valid for the function's parameters. InvalidArgument for kNone.
struct ToolChoiceGrammar {
  std::string prefix, schema, suffix;
};
Result<ToolChoiceGrammar> ToolChoiceGrammarFor(ToolCallFormat format,
                                               const std::vector<ToolSpec>& tools);

}  // namespace pdserve::gateway
