// scripts/check-manifests against deploy/kubernetes/ and against copies of its files with a
// mistake planted: a field of the wrong type, a misspelled field, a ScaledObject without its
// target, a pdserve flag that does not exist, and pods Prometheus cannot scrape. Each must fail,
// naming the file, the object and the field; the real files must pass.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/command_run.h"

namespace pdserve {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = PDSERVE_SOURCE_DIR;

testing::CommandRun CheckManifests(const std::vector<fs::path>& files) {
  std::string cmd =
      "cd '" + kSource.string() + "' && PDSERVE_BIN='" PDSERVE_BINARY "' scripts/check-manifests";
  for (const auto& f : files) cmd += " '" + f.string() + "'";
  return testing::RunShell("sh -c \"" + cmd + "\"");
}

// Copies of every file of deploy/kubernetes in `dir` (the checker follows references between
// them), NAME's with the first `from` replaced by `to`. The copies' paths.
std::vector<fs::path> Spoiled(const fs::path& dir, const std::string& name, const std::string& from,
                              const std::string& to) {
  fs::create_directories(dir);
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(kSource / "deploy" / "kubernetes")) {
    if (f.path().extension() != ".yaml") continue;
    std::string text = testing::ReadFile(f.path());
    if (f.path().filename() == name) {
      const size_t at = text.find(from);
      EXPECT_NE(at, std::string::npos) << name << " has no '" << from << "' to spoil";
      if (at != std::string::npos) text.replace(at, from.size(), to);
    }
    std::ofstream(dir / f.path().filename()) << text;
    files.push_back(dir / f.path().filename());
  }
  return files;
}

class CheckManifestsTest : public ::testing::Test {
 protected:
  fs::path dir_ =
      fs::temp_directory_path() / ("pdserve-check-manifests." + std::to_string(::getpid()));
  void TearDown() override { fs::remove_all(dir_); }
};

TEST_F(CheckManifestsTest, TheRepositorysManifestsPassAndSoDoTheirCopies) {
  testing::CommandRun run = CheckManifests({});
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("OK"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("pdserve flags checked"), std::string::npos) << run.out;
  run = CheckManifests(Spoiled(dir_ / "copy", "", "", ""));
  EXPECT_EQ(run.exit_code, 0) << "the copies the next test spoils pass unspoiled: " << run.out;
}

TEST_F(CheckManifestsTest, EachPlantedMistakeFailsNamingItsField) {
  struct Case {
    const char* file;
    const char* from;
    const char* to;
    const char* says;
  };
  const Case cases[] = {
      {"workers.yaml", "  replicas: 0", "  replicas: \"none\"", "spec.replicas"},
      {"workers.yaml", "selector:", "selectr:", "selectr"},
      {"keda-scaledobject.yaml", "scaleTargetRef:", "scaleTarget:", "scaleTargetRef"},
      {"workers.yaml", "- --kv-port", "- --kv-prot", "--kv-prot"},
      // Workers Prometheus cannot scrape: /metrics on the pod's loopback, or not where the
      // annotation says.
      {"workers.yaml", "- --metrics-address\n            - \"0.0.0.0\"",
       "- --metrics-address\n            - \"127.0.0.1\"", "--metrics-address 127.0.0.1"},
      {"workers.yaml", "prometheus.io/port: \"9100\"", "prometheus.io/port: \"9101\"",
       "prometheus.io/port"},
      {"gateway.yaml", "prometheus.io/scrape: \"true\"", "prometheus.io/scrape: \"false\"",
       "prometheus.io/scrape"},
  };
  for (const Case& c : cases) {
    const fs::path dir = dir_ / std::to_string(&c - cases);
    const testing::CommandRun run = CheckManifests(Spoiled(dir, c.file, c.from, c.to));
    EXPECT_EQ(run.exit_code, 1) << c.says << ": " << run.out;
    // The planted mistake, in the spoiled file, and nothing in the others.
    EXPECT_NE(run.out.find((dir / c.file).string()), std::string::npos) << run.out;
    for (const auto& f : fs::directory_iterator(dir)) {
      if (f.path().filename() == c.file) continue;
      EXPECT_EQ(run.out.find(f.path().string()), std::string::npos) << run.out;
    }
    EXPECT_NE(run.out.find(c.says), std::string::npos) << run.out;
  }
}

}  // namespace
}  // namespace pdserve
