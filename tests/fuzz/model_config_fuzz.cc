// Fuzz target: a model directory's config.json (model/model_config.h), read by every worker and
// by the gateway. A config either loads with a shape the engine can size buffers from, or is
// refused with an error naming the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // As ModelConfig::Load reads the file.
  const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  auto config = pdserve::model::ModelConfig::FromJson(j, "config.json");
  if (!config.ok()) {
    if (config.status().message().find("config.json") == std::string::npos) abort();
    return 0;
  }
  const auto& c = *config;
  if (c.vocab_size <= 0 || c.dim <= 0 || c.hidden_dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 ||
      c.n_kv_heads <= 0 || c.head_dim <= 0 || c.max_seq_len <= 0 || c.n_heads % c.n_kv_heads != 0) {
    abort();
  }
  // What the engine computes from it at start-up, and what the gateway writes back.
  if (c.RopeInverseFrequencies().size() != static_cast<size_t>(c.head_dim / 2)) abort();
  (void)c.ToJson().dump();
  return 0;
}
