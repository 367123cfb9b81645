// Fuzz target: tool calls in a model's output (gateway/tool_calls.h), for each format the
// gateway parses. The first byte picks the format and the chunk size the splitter is fed; the
// rest is the output. Every call's arguments must be a JSON object; where
// no call is found, what the splitter streamed and what it gave at the end is the whole text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "gateway/tool_calls.h"

using pdserve::gateway::ParseToolCalls;
using pdserve::gateway::ToolCallFormat;
using pdserve::gateway::ToolCallSplitter;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto format = static_cast<ToolCallFormat>(data[0] % 4);
  const size_t chunk = 1 + (data[0] >> 2) % 16;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  for (const auto& call : ParseToolCalls(format, text).calls) {
    const auto args = nlohmann::json::parse(call.arguments, nullptr, false);
    if (!args.is_object()) abort();
  }
  ToolCallSplitter splitter(format);
  std::string streamed;
  for (size_t at = 0; at < text.size(); at += chunk)
    streamed += splitter.Push(text.substr(at, chunk));
  const auto end = splitter.Finish();
  if (end.calls.empty() && streamed + end.content != text) abort();
  return 0;
}
