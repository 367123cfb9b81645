// For the end-to-end tests: pdserve processes started (fork and exec) and stopped (kill -9
// included), a command's output and exit code, waits for a ready file, a process's log and the
// tiny model made for a test. One thread per Process.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace pdserve::testing {

// The pdserve binary the processes run: the build's, or $PDSERVE_TEST_BINARY where the test
// binary travelled without its build folder (scripts/gpu-check's bundle).
inline const char* PdserveBinary() {
  const char* carried = std::getenv("PDSERVE_TEST_BINARY");
  return carried && *carried ? carried : PDSERVE_BINARY;
}

class Process {
 public:
  explicit Process(std::vector<std::string> args, const std::string& log_path = "/dev/null") {
    pid_ = ::fork();
    if (pid_ == 0) {
      std::freopen(log_path.c_str(), "a", stderr);
      std::freopen(log_path.c_str(), "a", stdout);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(PdserveBinary()));
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(PdserveBinary(), argv.data());
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
  pid_t pid() const { return pid_; }  // -1 once it was waited for

 private:
  pid_t pid_ = -1;
};

// Polls `done` every 50 ms until it holds or `timeout` passes; whether it held at the end.
template <typename Predicate>
bool WaitFor(Predicate done, std::chrono::steady_clock::duration timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

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

// The arguments of a `pdserve sim` process of `model`'s simulated workers timed by `profile`,
// dialling a gateway's control port on this host, followed by `flags`.
inline std::vector<std::string> SimArgs(const std::string& model, int control_port,
                                        const std::string& profile,
                                        const std::vector<std::string>& flags) {
  std::vector<std::string> args = {
      "sim",       "--model", model, "--gateway", "127.0.0.1:" + std::to_string(control_port),
      "--profile", profile};
  args.insert(args.end(), flags.begin(), flags.end());
  return args;
}

inline std::string RunPdserve(const std::string& args) {
  FILE* p = ::popen(
      ("timeout 120 " + std::string(PdserveBinary()) + " " + args + " 2>/dev/null").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ::pclose(p);
  return out;
}

// Runs pdserve with `args`: its exit code, what it wrote to stdout, and to stderr.
struct PdserveRun {
  int exit_code = -1;
  std::string out, err;
};
inline PdserveRun RunPdserveWithOutput(const std::string& args) {
  char err_path[] = "/tmp/pdserve-stderr-XXXXXX";
  const int fd = ::mkstemp(err_path);
  if (fd >= 0) ::close(fd);
  FILE* p = ::popen(
      ("timeout 120 " + std::string(PdserveBinary()) + " " + args + " 2>" + err_path).c_str(), "r");
  PdserveRun run;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) run.out.append(buf, n);
  const int status = ::pclose(p);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  run.err.assign(std::istreambuf_iterator<char>(err), {});
  ::unlink(err_path);
  return run;
}

// Everything a process has logged so far.
inline std::string ReadLog(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Makes the built-in tiny model in `dir`/tiny; its path, or "" when pdserve could not.
inline std::string MakeTinyModel(const std::string& dir) {
  const std::string model = dir + "/tiny";
  if (RunPdserve("make-model --preset tiny --out " + model).find("wrote") == std::string::npos) {
    return "";
  }
  return model;
}

}  // namespace pdserve::testing
