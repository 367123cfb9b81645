// Writes complete Hugging Face-style model directories with random weights, deterministic by
// seed: config.json, model.safetensors (or shards with an index), generation_config.json and a
// byte-level BPE tokenizer (or a real model's tokenizer and chat template, copied). `tiny` (about
// 1M parameters) is the built-in default model and the test model; `small` (about 100M) is for
// benchmarks; `llama3-8b` has Llama-3-8B's shape (16 GB in bf16; writing it takes minutes, so
// `pdserve bench engine --random-shape llama3-8b` makes the same shape directly in GPU memory).
// `qwen3-tiny` is a Qwen3 dense model as small as `tiny` (q/k norms, tied embeddings, heads wider
// than hidden_size / heads); `qwen3-0.6b` has Qwen3-0.6B's shape. Used by `pdserve make-model`,
// `pdserve up` and tests; safe to call from any thread for different directories.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model_config.h"

namespace pdserve::model {

struct MakeModelOptions {
  std::string preset = "tiny";  // one of PresetNames()
  std::string out_dir;          // created if missing; existing model files are replaced
  uint64_t seed = 0;
  DType dtype = DType::kF32;  // weight dtype in the files
  int shards = 1;             // > 1 writes model-0000i-of-0000n.safetensors and an index
  // Empty: the preset's. Or LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (q/k/v
  // biases) or Qwen3ForCausalLM (q/k norms) on the preset's shape.
  std::string architecture;
  // Empty: a byte-level BPE tokenizer of pdserve's own. Or a real model's directory whose
  // tokenizer.json, tokenizer_config.json and chat_template.jinja (those it has) are copied;
  // its vocabulary sets vocab_size (rounded up to 64 rows) and its bos and eos tokens the ids.
  std::string tokenizer_dir;
};

// The presets, in the order `pdserve make-model --help` lists them.
const std::vector<std::string>& PresetNames();

// The preset's shape (vocab_size is filled in once the tokenizer is written).
Result<ModelConfig> PresetConfig(const std::string& preset);

// Random weights for `config`, written as safetensors in `dir`. Exposed for tests that need odd
// shapes; MakeModel calls it.
Status WriteRandomWeights(const ModelConfig& config, const std::string& dir, uint64_t seed,
                          DType dtype, int shards);

Status MakeModel(const MakeModelOptions& options);

// The built-in tiny model's directory (made on first use): $PDSERVE_HOME or
// ~/.cache/pdserve, then models/tiny.
Result<std::string> EnsureBuiltinModel();

}  // namespace pdserve::model
