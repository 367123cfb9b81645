// Test helpers for end-to-end tests: start pdserve processes, wait for their ready files, run
// curl against them, and stop them (kill -9 included). Loopback only; ports chosen by the OS.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace pdserve::testing {

class Process {
 public:
  explicit Process(std::vector<std::string> args, const std::string& log_path = "/dev/null") {
    pid_ = ::fork();
    if (pid_ == 0) {
      std::freopen(log_path.c_str(), "a", stderr);
      std::freopen(log_path.c_str(), "a", stdout);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(PDSERVE_BINARY));
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(PDSERVE_BINARY, argv.data());
      ::_exit(127);
    }
  }
  ~Process() { Kill(SIGKILL); }
  void Kill(int sig) {
    if (pid_ > 0) {
      ::kill(pid_, sig);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  // Sends `sig` without waiting.
  void Signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // Waits up to `timeout` for the process to exit; its exit code, or -1.
  int Wait(std::chrono::seconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0 && std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  bool running() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

inline nlohmann::json WaitForJsonFile(const std::string& path, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    std::ifstream in(path);
    if (in) {
      auto j = nlohmann::json::parse(in, nullptr, false);
      if (!j.is_discarded()) return j;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return nullptr;
}

struct HttpResult {
  int status = 0;
  std::string body;
};

// POSTs (or GETs, when body is empty) with curl; the status code and body.
inline HttpResult Curl(int port, const std::string& path, const std::string& body = "",
                       int timeout_s = 60) {
  std::string cmd = "curl -sN --max-time " + std::to_string(timeout_s) +
                    " -w '\\n%{http_code}' http://127.0.0.1:" + std::to_string(port) + path;
  if (!body.empty()) {
    std::string escaped;
    for (char c : body) escaped += c == '\'' ? std::string("'\\''") : std::string(1, c);
    cmd += " -H 'Content-Type: application/json' -d '" + escaped + "'";
  }
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ::pclose(p);
  HttpResult r;
  const auto nl = out.rfind('\n');
  if (nl != std::string::npos) {
    r.status = std::atoi(out.c_str() + nl + 1);
    r.body = out.substr(0, nl);
  }
  return r;
}

inline std::string RunPdserve(const std::string& args) {
  FILE* p = ::popen(("timeout 120 " PDSERVE_BINARY " " + args + " 2>/dev/null").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ::pclose(p);
  return out;
}

}  // namespace pdserve::testing
