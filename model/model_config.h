// ModelConfig: the shape and hyper-parameters of a Llama-family model (Llama, Mistral, Qwen2,
// Qwen3 dense), read from a Hugging Face `config.json`. A field whose value pdserve cannot run
// as Hugging Face would (another activation, a mixture of experts, YaRN, a quantized
// checkpoint) is refused with an error naming the file and the field. Built once at start-up and
// shared read-only; safe to read from any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/dtype.h"

namespace pdserve::model {

// Llama-3's frequency-dependent RoPE scaling, or a plain linear position scaling.
struct RopeScaling {
  std::string type;  // "llama3" or "linear"
  double factor = 1.0;
  double low_freq_factor = 1.0;                 // llama3 only
  double high_freq_factor = 4.0;                // llama3 only
  int original_max_position_embeddings = 8192;  // llama3 only
};

struct ModelConfig {
  // "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM" or "Qwen3ForCausalLM"
  std::string architecture;
  std::string model_id;  // the name clients use; the model directory's name by default
  int vocab_size = 0;
  int dim = 0;         // hidden_size
  int hidden_dim = 0;  // intermediate_size (SwiGLU)
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;   // < n_heads for grouped-query attention
  int head_dim = 0;     // may differ from dim / n_heads (Qwen3-0.6B: dim 1024, 16 heads of 128)
  int max_seq_len = 0;  // max_position_embeddings, capped by a sliding window that applies
  float rms_norm_eps = 1e-5f;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (Qwen2)
  // Each head's q and k through an RMSNorm of its own ([head_dim] weights, rms_norm_eps) after
  // the projections (and biases) and before RoPE (Qwen3).
  bool qk_norm = false;
  DType dtype = DType::kF32;  // torch_dtype: the dtype the weights are meant to run in
  std::optional<int> bos_token_id;
  std::vector<int> eos_token_ids;

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  // RoPE's inverse frequency of each pair of a head's dimensions (head_dim / 2 of them), with
  // Llama-3 or linear scaling applied, in double. Every backend rotates by these angles.
  std::vector<double> RopeInverseFrequencies() const;

  // `source` names the file in error messages.
  static Result<ModelConfig> FromJson(const nlohmann::json& j, const std::string& source);
  // Reads DIR/config.json; model_id defaults to DIR's last path component.
  static Result<ModelConfig> Load(const std::string& model_dir);
  nlohmann::json ToJson() const;
};

}  // namespace pdserve::model
