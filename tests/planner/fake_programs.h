// For the planner's tests: programs standing in for an orchestrator's (sbatch, an operator's
// scale script) written as shell scripts into a test's TempDir, and the files they leave.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/temp_dir.h"

namespace pdserve::planner::testing {

using ::pdserve::testing::TempDir;

// Writes `body` after a #!/bin/sh line to `path`, executable; returns the path.
inline std::string WriteScript(const std::string& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace pdserve::planner::testing
