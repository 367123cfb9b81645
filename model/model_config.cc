#include "model/model_config.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

#include "common/json_text.h"

namespace pdserve::model {
namespace {

using nlohmann::json;

// Reads an integer field that must be present and positive.
Status ReadPositive(const json& j, const char* key, const std::string& source, int* out) {
  auto it = j.find(key);
  if (it == j.end()) return InvalidArgument(source + ": missing field '" + key + "'");
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > (1 << 30)) {
    return InvalidArgument(source + ": field '" + key + "' must be a positive integer, got " +
                           DescribeJson(*it));
  }
  *out = it->get<int>();
  return Status::Ok();
}

Result<std::optional<RopeScaling>> ReadRopeScaling(const json& j, const std::string& source) {
  auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null()) return std::optional<RopeScaling>();
  if (!it->is_object()) return InvalidArgument(source + ": 'rope_scaling' must be an object");
  RopeScaling s;
  auto type = it->find("rope_type");
  if (type == it->end()) type = it->find("type");  // the older name
  if (type == it->end()) {
    s.type = "default";
  } else if (type->is_string()) {
    s.type = type->get<std::string>();
  } else {
    return InvalidArgument(source + ": rope_scaling's type must be a string, got " +
                           DescribeJson(*type));
  }
  if (s.type == "default") return std::optional<RopeScaling>();
  if (s.type != "llama3" && s.type != "linear") {
    return Unimplemented(source + ": rope_scaling type '" + s.type +
                         "' is not supported (supported: llama3, linear)");
  }
  try {
    s.factor = it->value("factor", 1.0);
    s.low_freq_factor = it->value("low_freq_factor", 1.0);
    s.high_freq_factor = it->value("high_freq_factor", 4.0);
    s.original_max_position_embeddings = it->value("original_max_position_embeddings", 8192);
  } catch (const json::exception& e) {
    return InvalidArgument(source + ": bad rope_scaling: " + e.what());
  }
  if (s.factor <= 0 || (s.type == "llama3" && s.high_freq_factor <= s.low_freq_factor)) {
    return InvalidArgument(source + ": rope_scaling factors out of range");
  }
  return std::optional<RopeScaling>(s);
}

// Sizes past any model's, refused before anything is allocated by them, and such that every
// product of them the engine forms in int (q_dim, kv_dim, a layer's rows) stays in range.
Status CheckSizes(const ModelConfig& c, const std::string& source) {
  struct Limit {
    const char* field;
    int64_t value, max;
  };
  const Limit limits[] = {
      {"num_hidden_layers", c.n_layers, 4096},
      {"num_attention_heads", c.n_heads, 65536},
      {"num_key_value_heads", c.n_kv_heads, 65536},
      {"head_dim", c.head_dim, 65536},
      {"hidden_size", c.dim, 1 << 20},
      {"intermediate_size", c.hidden_dim, 1 << 22},
      {"vocab_size", c.vocab_size, 1 << 24},
  };
  for (const Limit& l : limits) {
    if (l.value > l.max) {
      return InvalidArgument(fmt::format("{}: {} = {} is past any model's (at most {})", source,
                                         l.field, l.value, l.max));
    }
  }
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim;
  if (q_dim > (1 << 22)) {
    return InvalidArgument(
        fmt::format("{}: num_attention_heads x head_dim = {} is past any model's (at most {})",
                    source, q_dim, 1 << 22));
  }
  return Status::Ok();
}

// eos_token_id may be a number or a list of numbers.
std::vector<int> ReadTokenIds(const json& j) {
  std::vector<int> ids;
  if (j.is_number_integer()) ids.push_back(j.get<int>());
  if (j.is_array()) {
    for (const auto& v : j) {
      if (v.is_number_integer()) ids.push_back(v.get<int>());
    }
  }
  return ids;
}

}  // namespace

std::vector<double> ModelConfig::RopeInverseFrequencies() const {
  const int half = head_dim / 2;
  std::vector<double> inv(half);
  for (int i = 0; i < half; ++i) inv[i] = 1.0 / std::pow(rope_theta, 2.0 * i / head_dim);
  if (!rope_scaling) return inv;
  const RopeScaling& s = *rope_scaling;
  if (s.type == "linear") {
    for (double& f : inv) f /= s.factor;
    return inv;
  }
  const double old_len = s.original_max_position_embeddings;
  const double low_wavelen = old_len / s.low_freq_factor;
  const double high_wavelen = old_len / s.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen > low_wavelen) {
      f /= s.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth =
          (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1 - smooth) * f / s.factor + smooth * f;
    }
  }
  return inv;
}

Result<ModelConfig> ModelConfig::FromJson(const json& j, const std::string& source) {
  if (!j.is_object()) return InvalidArgument(source + ": not a JSON object");
  ModelConfig c;
  auto archs = j.find("architectures");
  if (archs == j.end() || !archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
    return InvalidArgument(source + ": missing 'architectures' (e.g. [\"LlamaForCausalLM\"])");
  }
  c.architecture = (*archs)[0].get<std::string>();
  if (c.architecture != "LlamaForCausalLM" && c.architecture != "MistralForCausalLM" &&
      c.architecture != "Qwen2ForCausalLM") {
    return Unimplemented(source + ": unknown architecture '" + c.architecture +
                         "' (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM)");
  }
  PDSERVE_RETURN_IF_ERROR(ReadPositive(j, "vocab_size", source, &c.vocab_size));
  PDSERVE_RETURN_IF_ERROR(ReadPositive(j, "hidden_size", source, &c.dim));
  PDSERVE_RETURN_IF_ERROR(ReadPositive(j, "intermediate_size", source, &c.hidden_dim));
  PDSERVE_RETURN_IF_ERROR(ReadPositive(j, "num_hidden_layers", source, &c.n_layers));
  PDSERVE_RETURN_IF_ERROR(ReadPositive(j, "num_attention_heads", source, &c.n_heads));
  c.n_kv_heads = c.n_heads;
  if (j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()) {
    PDSERVE_RETURN_IF_ERROR(ReadPositive(j, "num_key_value_heads", source, &c.n_kv_heads));
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return InvalidArgument(source + ": num_attention_heads (" + std::to_string(c.n_heads) +
                           ") must be a multiple of num_key_value_heads (" +
                           std::to_string(c.n_kv_heads) + ")");
  }
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    PDSERVE_RETURN_IF_ERROR(ReadPositive(j, "head_dim", source, &c.head_dim));
  } else if (c.dim % c.n_heads != 0) {
    // As Hugging Face's LlamaAttention: without head_dim, heads split hidden_size evenly (and
    // more heads than hidden_size made head_dim 0, which the engine cannot size buffers by).
    return InvalidArgument(source + ": hidden_size (" + std::to_string(c.dim) +
                           ") must be a multiple of num_attention_heads (" +
                           std::to_string(c.n_heads) + ") unless head_dim is given");
  } else {
    c.head_dim = c.dim / c.n_heads;
  }
  if (c.head_dim % 2 != 0) return InvalidArgument(source + ": head_dim must be even for RoPE");
  c.max_seq_len = 2048;
  if (j.contains("max_position_embeddings")) {
    PDSERVE_RETURN_IF_ERROR(ReadPositive(j, "max_position_embeddings", source, &c.max_seq_len));
  }
  // Mistral's sliding window: we attend over the whole context, so cap the context at it.
  if (auto sw = j.find("sliding_window"); sw != j.end() && sw->is_number_integer() &&
                                          sw->get<int64_t>() > 0 &&
                                          sw->get<int64_t>() < c.max_seq_len) {
    c.max_seq_len = sw->get<int>();
  }
  try {
    c.rms_norm_eps = j.value("rms_norm_eps", 1e-6f);  // Hugging Face's LlamaConfig default
    c.rope_theta = j.value("rope_theta", 10000.0);
    c.tie_word_embeddings = j.value("tie_word_embeddings", false);
    c.attention_bias = j.value("attention_bias", c.architecture == "Qwen2ForCausalLM");
    std::string dtype = j.value("torch_dtype", std::string("float32"));
    auto parsed = ParseDType(dtype);
    if (!parsed) return InvalidArgument(source + ": unknown torch_dtype '" + dtype + "'");
    c.dtype = *parsed;
    if (auto b = j.find("bos_token_id"); b != j.end() && b->is_number_integer()) {
      c.bos_token_id = b->get<int>();
    }
    if (auto e = j.find("eos_token_id"); e != j.end()) c.eos_token_ids = ReadTokenIds(*e);
  } catch (const json::exception& e) {
    return InvalidArgument(source + ": " + e.what());
  }
  if (!(c.rms_norm_eps > 0) || !(c.rope_theta > 0)) {
    return InvalidArgument(source + ": rms_norm_eps and rope_theta must be positive");
  }
  PDSERVE_ASSIGN_OR_RETURN(c.rope_scaling, ReadRopeScaling(j, source));
  if (auto name = j.find("_name_or_path"); name != j.end() && name->is_string()) {
    c.model_id = name->get<std::string>();  // informational: any other type is ignored
  }
  PDSERVE_RETURN_IF_ERROR(CheckSizes(c, source));
  return c;
}

Result<ModelConfig> ModelConfig::Load(const std::string& model_dir) {
  namespace fs = std::filesystem;
  fs::path path = fs::path(model_dir) / "config.json";
  std::ifstream in(path);
  if (!in) return NotFound(path.string() + ": cannot open (is this a model directory?)");
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(path.string() + ": not valid JSON");
  PDSERVE_ASSIGN_OR_RETURN(ModelConfig c, FromJson(j, path.string()));
  c.model_id = fs::path(model_dir).lexically_normal().filename().string();
  if (c.model_id.empty())
    c.model_id = fs::path(model_dir).lexically_normal().parent_path().filename();
  return c;
}

json ModelConfig::ToJson() const {
  json j = {{"architectures", {architecture}},
            {"model_type", architecture == "Qwen2ForCausalLM"     ? "qwen2"
                           : architecture == "MistralForCausalLM" ? "mistral"
                                                                  : "llama"},
            {"vocab_size", vocab_size},
            {"hidden_size", dim},
            {"intermediate_size", hidden_dim},
            {"num_hidden_layers", n_layers},
            {"num_attention_heads", n_heads},
            {"num_key_value_heads", n_kv_heads},
            {"head_dim", head_dim},
            {"max_position_embeddings", max_seq_len},
            {"rms_norm_eps", rms_norm_eps},
            {"rope_theta", rope_theta},
            {"tie_word_embeddings", tie_word_embeddings},
            {"attention_bias", attention_bias},
            {"hidden_act", "silu"},
            {"torch_dtype", dtype == DType::kF32    ? "float32"
                            : dtype == DType::kBF16 ? "bfloat16"
                                                    : "float16"}};
  if (rope_scaling) {
    j["rope_scaling"] = {{"rope_type", rope_scaling->type}, {"factor", rope_scaling->factor}};
    if (rope_scaling->type == "llama3") {
      j["rope_scaling"]["low_freq_factor"] = rope_scaling->low_freq_factor;
      j["rope_scaling"]["high_freq_factor"] = rope_scaling->high_freq_factor;
      j["rope_scaling"]["original_max_position_embeddings"] =
          rope_scaling->original_max_position_embeddings;
    }
  }
  if (bos_token_id) j["bos_token_id"] = *bos_token_id;
  if (eos_token_ids.size() == 1) j["eos_token_id"] = eos_token_ids[0];
  if (eos_token_ids.size() > 1) j["eos_token_id"] = eos_token_ids;
  return j;
}

}  // namespace pdserve::model
