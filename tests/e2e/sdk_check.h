// For the end-to-end tests: runs the official `openai` npm SDK's checks
// (tests/tools/openai_sdk_check.mjs, installed by `scripts/setup --test`) against a gateway.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace pdserve::testing {

// Runs tests/tools/openai_sdk_check.mjs against the gateway on `http_port` serving `model`, with
// `extra_args`, and expects every check it makes, and each of `required`, to pass; its report
// ({ok, sdk_version, results: [{name, ok, detail}]}) into `report_out` when given. The SDK
// authenticates with `api_key`.
inline void ExpectSdkChecksPass(int http_port, const std::string& model,
                                const std::string& extra_args,
                                const std::vector<std::string>& required,
                                nlohmann::json* report_out = nullptr,
                                const std::string& api_key = "sk-good") {
  const std::string tools = std::string(PDSERVE_SOURCE_DIR) + "/tests/tools";
  ASSERT_EQ(std::system("node --version >/dev/null 2>&1"), 0)
      << "node is not installed: run scripts/setup --test";
  ASSERT_TRUE(std::filesystem::exists(tools + "/node_modules/openai/package.json"))
      << "the openai npm package is missing in tests/tools: run scripts/setup --test";
  const std::string command =
      "timeout 240 node " + tools +
      "/openai_sdk_check.mjs --base-url http://127.0.0.1:" + std::to_string(http_port) +
      "/v1 --model " + model + " --api-key " + api_key + " " + extra_args + " 2>&1";
  FILE* p = ::popen(command.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  const int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;

  auto report = nlohmann::json::parse(
      out.substr(out.rfind("\n{") == std::string::npos ? 0 : out.rfind("\n{") + 1), nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << "exit " << exit_code << ", no JSON report:\n" << out;
  std::printf("openai SDK %s\n", report.value("sdk_version", "?").c_str());
  std::set<std::string> names;
  for (const auto& r : report["results"]) {
    names.insert(r["name"].get<std::string>());
    EXPECT_TRUE(r["ok"].get<bool>()) << r["name"] << ": " << r.value("error", "");
    if (r["ok"].get<bool>() && r.contains("detail") && r["detail"].contains("class")) {
      std::printf("  %s -> %s: %s\n", r["name"].get<std::string>().c_str(),
                  r["detail"]["class"].get<std::string>().c_str(),
                  r["detail"]["message"].get<std::string>().c_str());
    }
  }
  for (const std::string& name : required)
    EXPECT_TRUE(names.count(name)) << name << " was not checked";
  EXPECT_EQ(exit_code, 0) << out;
  if (report_out) *report_out = report;
}

}  // namespace pdserve::testing
