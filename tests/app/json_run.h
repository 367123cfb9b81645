// Test support for the bench commands' tests: runs `pdserve ARGS --json FILE` with FILE in a
// fresh temporary folder and returns the run with the JSON it wrote (null when it wrote none).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tests/command_run.h"
#include "tests/model/random_model.h"

namespace pdserve::testing {

struct JsonRun {
  CommandRun run;
  nlohmann::json doc;
};

inline JsonRun PdserveJson(const std::string& args) {
  model::testing::TempDir dir;
  const std::string path = dir / "out.json";
  JsonRun r{Pdserve(args + " --json " + path), nullptr};
  if (r.run.exit_code == 0) r.doc = nlohmann::json::parse(ReadFile(path), nullptr, false);
  return r;
}

}  // namespace pdserve::testing
