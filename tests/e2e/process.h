// Test helpers for end-to-end tests: start pdserve processes, wait for their ready files, run
// curl against them, and stop them (kill -9 included). Loopback only; ports chosen by the OS.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/model/random_model.h"

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

struct HttpResult {
  int status = 0;
  std::string body;
};

// Runs a curl command line that prints the body, then a newline and the status code (-w); the
// status code and body. With `on_chunks`, reads the body as it comes and calls it once `chunks`
// SSE data events have arrived (to act mid-stream at a known point, not after a guessed delay);
// with `hang_up` too, then stops reading, and curl dies on its next write: a client that leaves
// mid-stream (its status is then 0).
inline HttpResult RunCurl(const std::string& cmd, int chunks = 0,
                          const std::function<void()>& on_chunks = {}, bool hang_up = false) {
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  bool called = false;
  for (ssize_t n; (n = ::read(::fileno(p), buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
    if (on_chunks && !called) {
      int seen = 0;
      for (size_t pos = 0; (pos = out.find("data: {", pos)) != std::string::npos; ++pos) ++seen;
      if (seen >= chunks) {
        called = true;
        on_chunks();
        if (hang_up) break;
      }
    }
  }
  ::pclose(p);
  HttpResult r;
  const auto nl = out.rfind('\n');
  if (nl != std::string::npos) {
    r.status = std::atoi(out.c_str() + nl + 1);
    r.body = out.substr(0, nl);
  }
  return r;
}

// POSTs (or GETs, when body is empty) with curl; RunCurl says what `chunks` and `on_chunks` do.
inline HttpResult Curl(int port, const std::string& path, const std::string& body = "",
                       int timeout_s = 60, int chunks = 0,
                       const std::function<void()>& on_chunks = {}) {
  std::string cmd = "curl -sN --max-time " + std::to_string(timeout_s) +
                    " -w '\\n%{http_code}' http://127.0.0.1:" + std::to_string(port) + path;
  if (!body.empty()) {
    std::string escaped;
    for (char c : body) escaped += c == '\'' ? std::string("'\\''") : std::string(1, c);
    cmd += " -H 'Content-Type: application/json' -d '" + escaped + "'";
  }
  return RunCurl(cmd, chunks, on_chunks);
}

// The text of an SSE completion stream (choices[0].text deltas), its usage's completion tokens
// and whether it ended in `data: [DONE]`.
inline std::string StreamedText(const std::string& sse, int* completion_tokens, bool* done) {
  std::string text;
  size_t pos = 0;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    const size_t end = sse.find("\n\n", pos);
    const std::string payload = sse.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") {
      *done = true;
      continue;
    }
    auto j = nlohmann::json::parse(payload);
    if (j.contains("usage") && !j["usage"].is_null())
      *completion_tokens = j["usage"]["completion_tokens"];
    if (!j["choices"].empty()) text += j["choices"][0].value("text", "");
  }
  return text;
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

// One HTTP/1.1 response as HttpConnection read it: header names lower-cased, the body de-chunked.
struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;
  std::string body;
  bool keep_alive = true;
};

// The bytes of one HTTP/1.1 request with a JSON body (none when `body` is empty).
inline std::string HttpRequestText(const std::string& method, const std::string& path,
                                   const std::string& body = "",
                                   const std::vector<std::string>& headers = {}) {
  std::string text = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& h : headers) text += h + "\r\n";
  if (!body.empty()) {
    text +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return text + "\r\n" + body;
}

// A blocking HTTP/1.1 client on one loopback connection, for what curl hides: closing the socket
// mid-request, response headers, pipelining, many keep-alive streams from threads. Every read has
// a deadline. One thread per connection.
class HttpConnection {
 public:
  explicit HttpConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) Close();
    if (fd_ >= 0) {
      int one = 1;
      ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
  }
  ~HttpConnection() { Close(); }
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool Send(const std::string& bytes) {
    size_t sent = 0;
    while (fd_ >= 0 && sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return fd_ >= 0;
  }

  // Reads one whole response by `deadline`. False (with `error` saying why, and what arrived in
  // *out) on end of file, timeout or malformed HTTP before the response ended.
  bool ReadResponse(HttpResponse* out, std::chrono::steady_clock::time_point deadline,
                    std::string* error) {
    *out = HttpResponse();
    size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline, error)) return false;
    }
    std::string head = buffer_.substr(0, header_end);
    buffer_.erase(0, header_end + 4);
    if (head.rfind("HTTP/1.", 0) != 0 || head.size() < 12) return Bad("status line", error);
    out->status = std::atoi(head.c_str() + 9);
    out->keep_alive = head.compare(0, 8, "HTTP/1.1") == 0;
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos && pos < head.size()) {
      const size_t next = head.find("\r\n", pos + 2);
      const std::string line =
          head.substr(pos + 2, next == std::string::npos ? next : next - pos - 2);
      pos = next;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), ::tolower);
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      out->headers[name] = value;
    }
    if (out->headers["connection"] == "close") out->keep_alive = false;
    if (out->headers["transfer-encoding"] == "chunked") {
      while (true) {
        size_t line_end;
        while ((line_end = buffer_.find("\r\n")) == std::string::npos) {
          if (!Fill(deadline, error)) return false;
        }
        const size_t size = std::strtoul(buffer_.c_str(), nullptr, 16);
        if (size == 0) {  // the last chunk; no trailers are expected
          while (buffer_.size() < line_end + 4) {
            if (!Fill(deadline, error)) return false;
          }
          buffer_.erase(0, line_end + 4);
          return true;
        }
        while (buffer_.size() < line_end + 2 + size + 2) {
          if (!Fill(deadline, error)) return false;
        }
        out->body.append(buffer_, line_end + 2, size);
        buffer_.erase(0, line_end + 2 + size + 2);
      }
    }
    if (out->headers.count("content-length")) {
      const size_t length = std::strtoul(out->headers["content-length"].c_str(), nullptr, 10);
      while (buffer_.size() < length) {
        if (!Fill(deadline, error)) return false;
      }
      out->body = buffer_.substr(0, length);
      buffer_.erase(0, length);
      return true;
    }
    while (Fill(deadline, error)) {  // neither: the body ends with the connection
    }
    out->body = std::move(buffer_);
    buffer_.clear();
    out->keep_alive = false;
    return *error == "end of file";
  }

 private:
  static bool Bad(const std::string& what, std::string* error) {
    *error = "malformed response: " + what;
    return false;
  }
  // Appends what the socket has by `deadline` to buffer_.
  bool Fill(std::chrono::steady_clock::time_point deadline, std::string* error) {
    if (fd_ < 0) return (*error = "not connected", false);
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return (*error = "timed out", false);
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
      if (ready < 0 && errno != EINTR) return (*error = "poll failed", false);
      if (ready <= 0) continue;
      char buf[16384];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) return (*error = "end of file", false);
      if (n < 0) return (*error = std::string("recv: ") + std::strerror(errno), false);
      buffer_.append(buf, static_cast<size_t>(n));
      return true;
    }
  }

  int fd_ = -1;
  std::string buffer_;
};

// The gateway's /health worker_load entries (each worker's latest load report); `key`: the API
// key a gateway with keys needs before it shows them.
inline nlohmann::json WorkerLoad(int port, const std::string& key = "") {
  auto h = key.empty() ? Curl(port, "/health")
                       : RunCurl(
                             "curl -s --max-time 10 -w '\\n%{http_code}' -H 'Authorization: "
                             "Bearer " +
                             key + "' http://127.0.0.1:" + std::to_string(port) + "/health");
  if (h.status != 200) return nlohmann::json::array();
  auto j = nlohmann::json::parse(h.body, nullptr, false);
  if (j.is_discarded() || !j.contains("worker_load")) return nlohmann::json::array();
  return j["worker_load"];
}

// The sum of one field over the workers in /health (e.g. "running"); -1 when there are none.
inline int SumOverWorkers(int port, const std::string& field) {
  auto load = WorkerLoad(port);
  if (load.empty()) return -1;
  int sum = 0;
  for (const auto& w : load) sum += w.value(field, 0);
  return sum;
}

// A gauge or counter's value from the gateway's /metrics ("name" or "name{labels}"); -1 if absent.
inline double MetricValue(int port, const std::string& name) {
  const std::string text = Curl(port, "/metrics").body;
  size_t pos = 0;
  while ((pos = text.find(name + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') return std::atof(text.c_str() + pos + name.size() + 1);
    pos += name.size();
  }
  return -1;
}

// The sum of a metric over all its label sets on the gateway's /metrics (e.g. every
// finished_reason of pdserve_request_success_total); 0 if absent.
inline double MetricSum(int port, const std::string& name) {
  const std::string text = Curl(port, "/metrics").body;
  double sum = 0;
  size_t pos = 0;
  while ((pos = text.find(name, pos)) != std::string::npos) {
    const bool line_start = pos == 0 || text[pos - 1] == '\n';
    pos += name.size();
    if (!line_start || pos >= text.size() || (text[pos] != ' ' && text[pos] != '{')) continue;
    const size_t value = text.find(' ', text[pos] == '{' ? text.find('}', pos) : pos);
    if (value != std::string::npos) sum += std::atof(text.c_str() + value + 1);
  }
  return sum;
}

// Everything a process has logged so far.
inline std::string ReadLog(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A metric (gauge or counter) from a worker's own /metrics, the worker started with
// --metrics-port 0 and logging to `log_path` (its port is in its log); -1 when it cannot be read.
inline double WorkerMetric(const std::string& log_path, const std::string& name) {
  const std::string log = ReadLog(log_path);
  const std::string marker = "metrics on http://127.0.0.1:";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return -1;
  const int port = std::atoi(log.c_str() + at + marker.size());
  const std::string text = Curl(port, "/metrics").body;
  for (size_t pos = 0; (pos = text.find(name + "{", pos)) != std::string::npos; ++pos) {
    if (pos != 0 && text[pos - 1] != '\n') continue;
    const size_t value = text.find("} ", pos);
    if (value != std::string::npos) return std::atof(text.c_str() + value + 2);
  }
  return -1;
}

// Waits (up to 10 s) until the worker logging to `log_path` reports no used KV pages on its
// /metrics (its heartbeats refresh the gauge).
inline void ExpectPagesReturnToZero(const std::string& log_path) {
  double used = -1;
  for (int i = 0; i < 100 && used != 0; ++i) {
    used = WorkerMetric(log_path, "pdserve_kv_pages_used");
    if (used != 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(used, 0) << log_path << ":\n" << ReadLog(log_path).substr(0, 3000);
}

// Makes the built-in tiny model in `dir`/tiny; its path, or "" when pdserve could not.
inline std::string MakeTinyModel(const std::string& dir) {
  const std::string model = dir + "/tiny";
  if (RunPdserve("make-model --preset tiny --out " + model).find("wrote") == std::string::npos) {
    return "";
  }
  return model;
}

// A `pdserve gateway` on OS-chosen ports (its log in `dir`/gateway.log) and the ports it bound;
// process is null when it did not start within 30 s. `control_port` > 0: that control port
// instead (a gateway restarting where its workers dial).
struct StartedGateway {
  std::unique_ptr<Process> process;
  int http_port = 0;
  int control_port = 0;
};

inline StartedGateway StartGateway(const std::string& dir, const std::string& model,
                                   std::vector<std::string> extra_args = {}, int control_port = 0) {
  std::filesystem::remove(dir + "/ready.json");  // a previous gateway's
  std::vector<std::string> args = {"gateway",
                                   "--model",
                                   model,
                                   "--port",
                                   "0",
                                   "--control-port",
                                   std::to_string(control_port),
                                   "--ready-file",
                                   dir + "/ready.json"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  StartedGateway g;
  g.process = std::make_unique<Process>(args, dir + "/gateway.log");
  auto ready = WaitForJsonFile(dir + "/ready.json", std::chrono::seconds(30));
  if (ready.is_null()) {
    g.process.reset();
    return g;
  }
  g.http_port = ready["http_port"];
  g.control_port = ready["control_port"];
  return g;
}

// A colocated worker (`pdserve decode --role both`, one CPU thread) dialling `control_port`,
// with its /metrics on a port of the OS's choosing (WorkerMetric reads it from `log_path`).
inline std::unique_ptr<Process> StartColocatedWorker(const std::string& model, int control_port,
                                                     const std::string& log_path) {
  return std::make_unique<Process>(
      std::vector<std::string>{"decode", "--role", "both", "--model", model, "--threads", "1",
                               "--metrics-port", "0", "--gateway",
                               "127.0.0.1:" + std::to_string(control_port)},
      log_path);
}

// The body of a greedy streamed completion of `max_tokens` tokens (end-of-sequence ignored, usage
// asked for).
inline std::string GreedyStreamBody(const std::string& model, const std::string& prompt,
                                    int max_tokens) {
  return nlohmann::json{{"model", model},
                        {"prompt", prompt},
                        {"max_tokens", max_tokens},
                        {"temperature", 0},
                        {"ignore_eos", true},
                        {"stream", true},
                        {"stream_options", {{"include_usage", true}}}}
      .dump();
}

// Expects the SSE stream `sse` (of GreedyStreamBody) to have ended with [DONE], without an error
// event, with `max_tokens` tokens whose text is `pdserve generate`'s for the same prompt
// (`generate_args`: "--model DIR --prompt P"; one thread, like the workers of the tests).
inline void ExpectStreamMatchesGenerate(const std::string& sse, int max_tokens,
                                        const std::string& generate_args) {
  int tokens = 0;
  bool done = false;
  const std::string text = StreamedText(sse, &tokens, &done);
  EXPECT_EQ(sse.find("data: {\"error\""), std::string::npos) << sse.substr(0, 300);
  EXPECT_TRUE(done);
  EXPECT_EQ(tokens, max_tokens);
  const auto reference =
      nlohmann::json::parse(RunPdserve("generate --json --ignore-eos --threads 1 --max-tokens " +
                                       std::to_string(max_tokens) + " " + generate_args),
                            nullptr, false);
  ASSERT_TRUE(reference.is_object()) << generate_args;
  EXPECT_TRUE(text == reference["text"].get<std::string>()) << "differs from pdserve generate";
}

// Sends `prompt` greedily for 12 tokens through the gateway on `http_port`, plain and streamed,
// and expects the token ids (return_token_ids), the text and the token counts of `pdserve
// generate` on `model`: the reference every serving setup must match token for token
// (`generate_flags`: e.g. the workers' --device). Returns the streamed response's body.
inline std::string ExpectGreedyMatchesGenerate(int http_port, const std::string& model,
                                               const std::string& prompt,
                                               const std::string& generate_flags = "") {
  const PdserveRun generated =
      RunPdserveWithOutput("generate --json --ignore-eos --max-tokens 12 --threads 1 --model " +
                           model + " --prompt '" + prompt + "' " + generate_flags);
  auto reference = nlohmann::json::parse(generated.out, nullptr, false);
  EXPECT_EQ(generated.exit_code, 0) << generated.out << generated.err;
  EXPECT_TRUE(reference.is_object()) << generated.out << generated.err;
  if (generated.exit_code != 0 || !reference.is_object()) return "";
  const std::vector<int32_t> want = reference["tokens"];
  EXPECT_EQ(want.size(), 12u) << generated.out;
  const nlohmann::json body = {{"model", "tiny"},    {"prompt", prompt},
                               {"max_tokens", 12},   {"temperature", 0},
                               {"ignore_eos", true}, {"return_token_ids", true}};
  auto plain = Curl(http_port, "/v1/completions", body.dump());
  EXPECT_EQ(plain.status, 200) << plain.body;
  if (plain.status != 200) return "";
  auto j = nlohmann::json::parse(plain.body);
  const auto& choice = j["choices"][0];
  EXPECT_EQ(choice["token_ids"].get<std::vector<int32_t>>(), want) << prompt;
  EXPECT_EQ(choice["prompt_token_ids"].size(), reference["prompt_tokens"].get<size_t>());
  EXPECT_EQ(choice["text"], reference["text"]) << prompt;
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_EQ(j["usage"]["prompt_tokens"], reference["prompt_tokens"]);

  nlohmann::json streamed_body = body;
  streamed_body["stream"] = true;
  streamed_body["stream_options"] = {{"include_usage", true}};
  auto streamed = Curl(http_port, "/v1/completions", streamed_body.dump());
  std::vector<int32_t> streamed_ids;
  for (size_t pos = 0; (pos = streamed.body.find("data: {", pos)) != std::string::npos; ++pos) {
    auto chunk = nlohmann::json::parse(
        streamed.body.substr(pos + 6, streamed.body.find("\n\n", pos) - pos - 6), nullptr, false);
    if (chunk.is_discarded() || !chunk.contains("choices") || chunk["choices"].empty()) continue;
    for (int32_t id : chunk["choices"][0].value("token_ids", std::vector<int32_t>{}))
      streamed_ids.push_back(id);
  }
  EXPECT_EQ(streamed_ids, want) << prompt;
  int tokens = 0;
  bool done = false;
  EXPECT_EQ(StreamedText(streamed.body, &tokens, &done), reference["text"]) << prompt;
  EXPECT_EQ(tokens, 12);
  EXPECT_TRUE(done);
  return streamed.body;
}

// Waits up to `timeout` until `n` workers have registered and sent a load report.
inline bool WaitForWorkerLoad(int http_port, size_t n, std::chrono::seconds timeout,
                              const std::string& key = "") {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (WorkerLoad(http_port, key).size() == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// A fixture with the tiny model made in a temporary folder and a gateway serving it on
// OS-chosen ports; each test starts the workers it needs.
class GatewayFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = MakeTinyModel(dir_.path());
    ASSERT_FALSE(model_.empty()) << "make-model failed";
    auto gateway = StartGateway(dir_.path(), model_);
    ASSERT_TRUE(gateway.process) << "gateway did not start";
    gateway_ = std::move(gateway.process);
    http_ = gateway.http_port;
    control_ = gateway.control_port;
  }

  model::testing::TempDir dir_;
  std::string model_;
  std::unique_ptr<Process> gateway_;
  int http_ = 0, control_ = 0;
};

}  // namespace pdserve::testing
