// What the gateway's in-process tests share: a small byte-level tokenizer written once per
// process, its ids of a text, running the ready handlers of a test's io_context, and a
// response header by name.
#pragma once

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_writer.h"

namespace pdserve::gateway::testing {

inline std::shared_ptr<const tokenizer::Tokenizer> TestTokenizer() {
  static const auto tokenizer = [] {
    // One folder per process: ctest runs tests in parallel processes.
    const auto dir = std::filesystem::path(PDSERVE_TEST_TMP) / "gateway_test_tokenizer" /
                     std::to_string(::getpid());
    if (!tokenizer::WriteByteLevelTokenizer(dir.string()).ok()) std::abort();
    return tokenizer::Tokenizer::Load(dir.string()).value();
  }();
  return tokenizer;
}

inline std::vector<int32_t> Ids(const std::string& text) {
  return TestTokenizer()->Encode(text, /*add_special=*/false).value();
}

// Runs what is ready on `io` (the call's strand in these tests), then lets it run again.
inline void RunReady(boost::asio::io_context& io) {
  io.poll();
  io.restart();
}

inline std::string HeaderValue(const std::vector<std::pair<std::string, std::string>>& headers,
                               const std::string& name) {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return "";
}

}  // namespace pdserve::gateway::testing
