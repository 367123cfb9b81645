// For the end-to-end tests: HTTP requests through curl (a child process) to a server on this
// host, read as they stream, and the text of an SSE completion stream.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace pdserve::testing {

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

}  // namespace pdserve::testing
