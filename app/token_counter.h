// The token counter `bench serve` and `bench acceptance` use when a server sends no usage:
// token counts from a tokenizer.json, so bench/ itself needs no model code. Any thread.
#pragma once

#include <string>

#include "bench/serve/dataset.h"
#include "common/status.h"

namespace pdserve::app {

// Empty path: bench's bytes / 4 estimate. Text that does not encode (invalid UTF-8) falls back
// to that estimate rather than failing the run.
Result<bench::TokenCounter> LoadTokenCounter(const std::string& path);

}  // namespace pdserve::app
