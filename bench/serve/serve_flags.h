// The flags of `pdserve bench serve`, shared with `pdserve bench acceptance`: binds a
// ServeConfig and the output paths to a CLI11 command, with vLLM's flag names where vLLM has one.
// Call once per command while building the CLI (single-threaded); the bound structs must outlive
// parsing.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "bench/serve/serve_session.h"

namespace pdserve::bench {

struct ServeOutputs {
  std::string result_json;
  std::string result_csv;
  std::string result_html;
  std::string progress = "auto";  // auto (when stderr is a terminal), on, off
  bool insecure = false;          // https without certificate checks
};

void AddServeFlags(CLI::App& command, ServeConfig& config, ServeOutputs& outputs);

// Settles derived settings after parsing: progress from the terminal, and `--request-rate inf`.
void FinishServeFlags(ServeConfig& config, const ServeOutputs& outputs);

}  // namespace pdserve::bench
