// Test support: runs the built `pdserve` binary as a user would, with a time limit, and reads
// files it wrote. For tests whose CMake target defines PDSERVE_BINARY (every test file that
// names it; see tests/CMakeLists.txt).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace pdserve::testing {

struct CommandRun {
  int exit_code;
  std::string out;  // stdout and stderr together
};

// `command` through the shell, killed after `timeout_s` seconds (exit code 124 then).
inline CommandRun RunShell(const std::string& command, int timeout_s = 120) {
  const std::string cmd = "timeout " + std::to_string(timeout_s) + " " + command + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// `pdserve ARGS` through the shell, killed after `timeout_s` seconds (exit code 124 then).
inline CommandRun Pdserve(const std::string& args, int timeout_s = 120) {
  return RunShell(PDSERVE_BINARY " " + args, timeout_s);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `command` through the shell: its stdout, or nullopt when it could not run or exited non-zero.
// Its stderr goes to the test's.
inline std::optional<std::string> StdoutOf(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buffer[65536];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  if (::pclose(pipe) != 0) return std::nullopt;
  return out;
}

}  // namespace pdserve::testing
