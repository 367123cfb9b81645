// `pdserve profile check` as a user runs it: a profile of the built-in tiny model whose step
// times are a thousandth of the real ones is measured against this host with the profile's own
// device, dtype and threads, and warns (exit 1 with --strict); a profile of a model that is not a
// make-model preset, with no --model, is a clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/command_run.h"

namespace pdserve {
namespace {

using pdserve::testing::Pdserve;

// profiles/small-cpu.json, renamed to a model of `model_id`, its step times times `scale`.
std::string WriteProfile(const std::string& name, const std::string& model_id, double scale) {
  std::ifstream in(std::string(PDSERVE_SOURCE_DIR) + "/profiles/small-cpu.json");
  nlohmann::json p = nlohmann::json::parse(in);
  p["model_id"] = model_id;
  p["name"] = name;
  for (const char* kind : {"prefill", "decode"}) {
    for (const char* part : {"base", "per_token", "per_context"}) {
      p[kind][part] = p[kind][part].get<double>() * scale;
    }
    p.erase(std::string(kind) + "_curve");
  }
  const auto path =
      std::filesystem::temp_directory_path() /
      ("pdserve-profile-check-test-" + name + "-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << p.dump();
  return path.string();
}

TEST(ProfileCommandTest, CheckMeasuresWithTheProfilesSettingsAndWarnsWhenOff) {
  const std::string path = WriteProfile("fast", "tiny", 1e-3);
  const auto run = Pdserve("profile check --profile " + path + " --repeats 1");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("on cpu (dtype auto, 1 thread(s)), as the profile recorded"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("median here/profile: prefill"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("WARNING: this host's prefill steps take"), std::string::npos) << run.out;
  EXPECT_EQ(Pdserve("profile check --profile " + path + " --repeats 1 --strict").exit_code, 1);
  std::filesystem::remove(path);
}

TEST(ProfileCommandTest, AProfileOfAModelThatIsNoPresetNeedsItsModel) {
  const std::string path = WriteProfile("other", "llama3-70b-of-mine", 1);
  const auto run = Pdserve("profile check --profile " + path);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.out.find("is not a make-model preset: pass --model DIR"), std::string::npos)
      << run.out;
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace pdserve
