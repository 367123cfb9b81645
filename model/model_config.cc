#include "model/model_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

#include "common/json_text.h"

namespace pdserve::model {
namespace {

using nlohmann::json;

constexpr const char* kSupported =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM";

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

// Optional fields: absent or null leaves *out as it was; another type is refused by name.
Status ReadNumber(const json& j, const std::string& key, const std::string& source, double* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number()) {
    return InvalidArgument(source + ": field '" + key + "' must be a number, got " +
                           DescribeJson(*it));
  }
  *out = it->get<double>();
  return Status::Ok();
}

Status ReadBool(const json& j, const std::string& key, const std::string& source, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) {
    return InvalidArgument(source + ": field '" + key + "' must be true or false, got " +
                           DescribeJson(*it));
  }
  *out = it->get<bool>();
  return Status::Ok();
}

Status ReadString(const json& j, const std::string& key, const std::string& source,
                  std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) {
    return InvalidArgument(source + ": field '" + key + "' must be a string, got " +
                           DescribeJson(*it));
  }
  *out = it->get<std::string>();
  return Status::Ok();
}

// Mixture-of-experts architectures, refused as such rather than as unknown.
bool IsMixtureOfExperts(const std::string& architecture) {
  return architecture.find("Moe") != std::string::npos ||
         architecture.find("MoE") != std::string::npos || architecture == "MixtralForCausalLM" ||
         architecture == "DeepseekV2ForCausalLM" || architecture == "DeepseekV3ForCausalLM";
}

Status CheckArchitecture(const std::string& architecture, const std::string& source) {
  if (architecture == "LlamaForCausalLM" || architecture == "MistralForCausalLM" ||
      architecture == "Qwen2ForCausalLM" || architecture == "Qwen3ForCausalLM") {
    return Status::Ok();
  }
  if (IsMixtureOfExperts(architecture)) {
    return Unimplemented(source + ": architecture '" + architecture +
                         "' in 'architectures' is a mixture-of-experts model, which pdserve does "
                         "not run (supported: " +
                         kSupported + ")");
  }
  return Unimplemented(source + ": unknown architecture '" + architecture +
                       "' in 'architectures' (supported: " + kSupported + ")");
}

// Fields whose values change the maths in ways the engine does not implement. Each refusal
// names the field and the value.
Status RefuseUnsupportedFields(const json& j, const std::string& source) {
  // Expert counts, as Qwen2/Qwen3-MoE (num_experts), Mixtral (num_local_experts) and DeepSeek
  // (n_routed_experts) write them; a dense model has none, or 0.
  for (const char* key : {"num_experts", "num_local_experts", "n_routed_experts"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number_integer() || it->get<int64_t>() != 0) {
      return Unimplemented(source + ": field '" + key + "' = " + DescribeJson(*it) +
                           ": mixture-of-experts layers are not supported");
    }
  }
  if (auto it = j.find("quantization_config"); it != j.end() && !it->is_null()) {
    std::string method = "unknown";
    if (it->is_object()) PDSERVE_RETURN_IF_ERROR(ReadString(*it, "quant_method", source, &method));
    return Unimplemented(source + ": field 'quantization_config' (quant_method " +
                         DescribeJson(method) + "): quantized checkpoints are not supported");
  }
  std::string act = "silu";
  PDSERVE_RETURN_IF_ERROR(ReadString(j, "hidden_act", source, &act));
  if (act != "silu" && act != "swish") {  // transformers' ACT2FN: both are x * sigmoid(x)
    return Unimplemented(source + ": field 'hidden_act' = " + DescribeJson(act) +
                         " is not supported (supported: silu)");
  }
  bool mlp_bias = false;
  PDSERVE_RETURN_IF_ERROR(ReadBool(j, "mlp_bias", source, &mlp_bias));
  if (mlp_bias) {
    return Unimplemented(source + ": field 'mlp_bias' = true: MLP biases are not supported");
  }
  double partial = 1.0;
  PDSERVE_RETURN_IF_ERROR(ReadNumber(j, "partial_rotary_factor", source, &partial));
  if (partial != 1.0) {
    return Unimplemented(fmt::format(
        "{}: field 'partial_rotary_factor' = {}: RoPE over part of a head is not supported", source,
        partial));
  }
  return Status::Ok();
}

// `layer_types` (transformers 4.53 on): each layer's attention, "full_attention" or
// "sliding_attention". Sets *any_sliding when a layer slides; absent leaves it.
Status ReadLayerTypes(const json& j, int n_layers, const std::string& source, bool* any_sliding) {
  auto it = j.find("layer_types");
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) {
    return InvalidArgument(source + ": field 'layer_types' must be a list, got " +
                           DescribeJson(*it));
  }
  if (it->size() != static_cast<size_t>(n_layers)) {
    return InvalidArgument(
        fmt::format("{}: field 'layer_types' lists {} layers, but num_hidden_layers is {}", source,
                    it->size(), n_layers));
  }
  *any_sliding = false;
  for (const json& type : *it) {
    if (type == "sliding_attention") {
      *any_sliding = true;
    } else if (type != "full_attention") {
      return Unimplemented(source + ": field 'layer_types' holds " + DescribeJson(type) +
                           " (supported: full_attention, sliding_attention)");
    }
  }
  return Status::Ok();
}

// The sliding window that applies to some layer, if any. Mistral's applies to every layer.
// Qwen2's and Qwen3's apply only with use_sliding_window, and then to the layers layer_types
// says slide (without it, those from max_window_layers on), as transformers' Qwen2Config and
// Qwen3Config decide.
Result<std::optional<int>> ReadSlidingWindow(const json& j, const std::string& architecture,
                                             int n_layers, const std::string& source) {
  bool any_sliding = true;
  PDSERVE_RETURN_IF_ERROR(ReadLayerTypes(j, n_layers, source, &any_sliding));
  auto it = j.find("sliding_window");
  if (it == j.end() || it->is_null()) return std::optional<int>();
  if (!it->is_number_integer()) {
    return InvalidArgument(source + ": field 'sliding_window' must be an integer or null, got " +
                           DescribeJson(*it));
  }
  const int64_t window = it->get<int64_t>();
  if (window <= 0) return std::optional<int>();  // as null
  if (architecture == "Qwen2ForCausalLM" || architecture == "Qwen3ForCausalLM") {
    bool use = false;
    PDSERVE_RETURN_IF_ERROR(ReadBool(j, "use_sliding_window", source, &use));
    if (!use) return std::optional<int>();
    if (auto types = j.find("layer_types"); types == j.end() || types->is_null()) {
      double from = 28;  // transformers' default max_window_layers
      PDSERVE_RETURN_IF_ERROR(ReadNumber(j, "max_window_layers", source, &from));
      any_sliding = from < n_layers;
    }
  }
  if (!any_sliding) return std::optional<int>();
  return std::optional<int>(static_cast<int>(std::min<int64_t>(window, 1 << 30)));
}

// RoPE's settings: transformers 5's `rope_parameters` (rope_theta and the scaling in one
// object), or the older top-level `rope_theta` and `rope_scaling`.
Status ReadRope(const json& j, const std::string& source, ModelConfig* c) {
  std::string field = "rope_scaling";
  auto it = j.find("rope_parameters");
  if (it != j.end() && !it->is_null()) {
    field = "rope_parameters";
  } else {
    it = j.find("rope_scaling");
  }
  PDSERVE_RETURN_IF_ERROR(ReadNumber(j, "rope_theta", source, &c->rope_theta));
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) {
    return InvalidArgument(source + ": '" + field + "' must be an object, got " +
                           DescribeJson(*it));
  }
  if (it->contains("full_attention") || it->contains("sliding_attention")) {
    return Unimplemented(source + ": '" + field +
                         "' per layer type (full_attention, sliding_attention) is not supported");
  }
  PDSERVE_RETURN_IF_ERROR(ReadNumber(*it, "rope_theta", source + ": " + field, &c->rope_theta));
  double partial = 1.0;
  PDSERVE_RETURN_IF_ERROR(ReadNumber(*it, "partial_rotary_factor", source, &partial));
  if (partial != 1.0) {
    return Unimplemented(
        fmt::format("{}: {}.partial_rotary_factor = {}: RoPE over part of a head is not supported",
                    source, field, partial));
  }
  RopeScaling s;
  auto type = it->find("rope_type");
  if (type == it->end()) type = it->find("type");  // the older name
  if (type == it->end()) {
    s.type = "default";
  } else if (type->is_string()) {
    s.type = type->get<std::string>();
  } else {
    return InvalidArgument(source + ": " + field + "'s type must be a string, got " +
                           DescribeJson(*type));
  }
  if (s.type == "default") return Status::Ok();
  if (s.type != "llama3" && s.type != "linear") {
    return Unimplemented(source + ": " + field + " type '" + s.type +
                         "' is not supported (supported: default, linear, llama3)");
  }
  double original = s.original_max_position_embeddings;
  const std::string where = source + ": " + field;
  PDSERVE_RETURN_IF_ERROR(ReadNumber(*it, "factor", where, &s.factor));
  PDSERVE_RETURN_IF_ERROR(ReadNumber(*it, "low_freq_factor", where, &s.low_freq_factor));
  PDSERVE_RETURN_IF_ERROR(ReadNumber(*it, "high_freq_factor", where, &s.high_freq_factor));
  PDSERVE_RETURN_IF_ERROR(ReadNumber(*it, "original_max_position_embeddings", where, &original));
  if (!(s.factor > 0)) {
    return InvalidArgument(fmt::format("{}.factor must be positive, got {}", where, s.factor));
  }
  if (s.type == "llama3") {
    if (!(s.high_freq_factor > s.low_freq_factor) || !(s.low_freq_factor > 0)) {
      return InvalidArgument(fmt::format(
          "{}.high_freq_factor ({}) must be above low_freq_factor ({}), and both positive", where,
          s.high_freq_factor, s.low_freq_factor));
    }
    if (!(original >= 1 && original <= (1 << 30))) {
      return InvalidArgument(
          fmt::format("{}.original_max_position_embeddings must be a positive integer, got {}",
                      where, original));
    }
    s.original_max_position_embeddings = static_cast<int>(original);
  }
  c->rope_scaling = s;
  return Status::Ok();
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
  PDSERVE_RETURN_IF_ERROR(CheckArchitecture(c.architecture, source));
  const bool qwen3 = c.architecture == "Qwen3ForCausalLM";
  PDSERVE_RETURN_IF_ERROR(RefuseUnsupportedFields(j, source));
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
  } else if (qwen3) {
    c.head_dim = 128;  // transformers' Qwen3Config default, whatever hidden_size is
  } else if (c.dim % c.n_heads != 0) {
    // As Hugging Face's LlamaAttention: without head_dim, heads split hidden_size evenly (and
    // more heads than hidden_size made head_dim 0, which the engine cannot size buffers by).
    return InvalidArgument(source + ": hidden_size (" + std::to_string(c.dim) +
                           ") must be a multiple of num_attention_heads (" +
                           std::to_string(c.n_heads) + ") unless head_dim is given");
  } else {
    c.head_dim = c.dim / c.n_heads;
  }
  if (c.head_dim % 2 != 0) {
    return InvalidArgument(source + ": head_dim (" + std::to_string(c.head_dim) +
                           ") must be even for RoPE");
  }
  c.max_seq_len = 2048;
  if (j.contains("max_position_embeddings")) {
    PDSERVE_RETURN_IF_ERROR(ReadPositive(j, "max_position_embeddings", source, &c.max_seq_len));
  }
  // We attend over the whole context, which is the sliding window's attention as long as the
  // context fits in the window: cap the context at it.
  PDSERVE_ASSIGN_OR_RETURN(std::optional<int> window,
                           ReadSlidingWindow(j, c.architecture, c.n_layers, source));
  if (window && *window < c.max_seq_len) c.max_seq_len = *window;

  double eps = 1e-6;  // Hugging Face's LlamaConfig default (and Qwen's)
  PDSERVE_RETURN_IF_ERROR(ReadNumber(j, "rms_norm_eps", source, &eps));
  if (!(eps > 0) || !std::isfinite(static_cast<float>(eps))) {
    return InvalidArgument(
        fmt::format("{}: rms_norm_eps must be a positive number, got {}", source, eps));
  }
  c.rms_norm_eps = static_cast<float>(eps);
  PDSERVE_RETURN_IF_ERROR(ReadRope(j, source, &c));
  if (!(c.rope_theta > 0) || std::isinf(c.rope_theta)) {
    return InvalidArgument(
        fmt::format("{}: rope_theta must be a positive number, got {}", source, c.rope_theta));
  }
  PDSERVE_RETURN_IF_ERROR(ReadBool(j, "tie_word_embeddings", source, &c.tie_word_embeddings));
  // Qwen2 has q/k/v biases; Llama's attention_bias (and Qwen3's) also gives o_proj one, which
  // Weights::Load refuses by name if the file has it.
  c.attention_bias = c.architecture == "Qwen2ForCausalLM";
  PDSERVE_RETURN_IF_ERROR(ReadBool(j, "attention_bias", source, &c.attention_bias));
  c.qk_norm = qwen3;

  // transformers 5 writes `dtype` where 4 wrote `torch_dtype`.
  const char* dtype_field = j.contains("torch_dtype") ? "torch_dtype" : "dtype";
  std::string dtype = "float32";
  PDSERVE_RETURN_IF_ERROR(ReadString(j, dtype_field, source, &dtype));
  auto parsed = ParseDType(dtype);
  if (!parsed) {
    return InvalidArgument(source + ": field '" + dtype_field + "' = " + DescribeJson(dtype) +
                           " is not a dtype pdserve reads (float32, bfloat16, float16)");
  }
  c.dtype = *parsed;
  if (auto b = j.find("bos_token_id"); b != j.end() && b->is_number_integer()) {
    c.bos_token_id = b->get<int>();
  }
  if (auto e = j.find("eos_token_id"); e != j.end()) c.eos_token_ids = ReadTokenIds(*e);
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
            {"model_type", architecture == "Qwen3ForCausalLM"     ? "qwen3"
                           : architecture == "Qwen2ForCausalLM"   ? "qwen2"
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
