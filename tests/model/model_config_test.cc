// Reading config.json: the shapes and settings of each architecture pdserve runs (Llama,
// Mistral, Qwen2, Qwen3 dense) as transformers reads them, and refusals that name the field of
// anything it does not run.
#include "model/model_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/model/random_model.h"

namespace pdserve::model {
namespace {

using nlohmann::json;
using testing::SmallConfig;
using testing::TempDir;

// `depth` arrays nested around 1, as JSON text (too deep for nlohmann's dump() to write).
std::string NestedJson(int depth) {
  return std::string(depth, '[') + "1" + std::string(depth, ']');
}

// Qwen/Qwen3-0.6B's config.json as published (transformers 4.51).
const char* kQwen3_0_6B = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

json Qwen3Json() { return json::parse(kQwen3_0_6B); }

TEST(ModelConfigTest, ReadsQwen3DenseAsTransformersDoes) {
  auto c = ModelConfig::FromJson(Qwen3Json(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, "Qwen3ForCausalLM");
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->dim, 1024);
  EXPECT_EQ(c->n_heads, 16);
  EXPECT_EQ(c->n_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);  // not 1024 / 16
  EXPECT_EQ(c->q_dim(), 2048);
  EXPECT_EQ(c->kv_dim(), 1024);
  EXPECT_EQ(c->n_layers, 28);
  EXPECT_EQ(c->max_seq_len, 40960);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_FALSE(c->rope_scaling.has_value());
  EXPECT_EQ(c->dtype, DType::kBF16);
  EXPECT_EQ(c->bos_token_id, 151643);
  EXPECT_EQ(c->eos_token_ids, std::vector<int>{151645});

  // Written back and read again: the same model, model_type "qwen3".
  const json written = c->ToJson();
  EXPECT_EQ(written["model_type"], "qwen3");
  EXPECT_EQ(written["head_dim"], 128);
  auto again = ModelConfig::FromJson(written, "config.json");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->qk_norm);
  EXPECT_EQ(again->head_dim, 128);
  EXPECT_EQ(again->ToJson(), written);

  // Other architectures have no q/k norms.
  json llama = Qwen3Json();
  llama["architectures"] = {"LlamaForCausalLM"};
  EXPECT_FALSE(ModelConfig::FromJson(llama, "config.json")->qk_norm);
}

// transformers' Qwen3Config defaults head_dim to 128 (not hidden_size / heads) and
// attention_bias to false; an explicit attention_bias is read.
TEST(ModelConfigTest, Qwen3DefaultsAreTransformers) {
  json j = Qwen3Json();
  j.erase("head_dim");
  j.erase("attention_bias");
  auto c = ModelConfig::FromJson(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_FALSE(c->attention_bias);
  j["attention_bias"] = true;
  EXPECT_TRUE(ModelConfig::FromJson(j, "config.json")->attention_bias);
}

// transformers 5 writes `dtype` for torch_dtype and moves rope_theta and the scaling into
// `rope_parameters`.
TEST(ModelConfigTest, ReadsTransformers5Fields) {
  json j = Qwen3Json();
  j.erase("torch_dtype");
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["dtype"] = "bfloat16";
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5000000.0}};
  auto c = ModelConfig::FromJson(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->dtype, DType::kBF16);
  EXPECT_EQ(c->rope_theta, 5e6);
  EXPECT_FALSE(c->rope_scaling.has_value());
  j["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 10000.0}, {"factor", 2.0}};
  c = ModelConfig::FromJson(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->type, "linear");
  EXPECT_EQ(c->rope_scaling->factor, 2.0);
  EXPECT_EQ(c->rope_theta, 1e4);
}

// The engine attends over the whole context, which is a sliding window's attention while the
// context fits in it: the context is capped at a window that applies to some layer, and only
// then. Qwen's windows apply with use_sliding_window, to the layers from max_window_layers on
// (or those layer_types says slide); Mistral's to every layer.
TEST(ModelConfigTest, CapsTheContextAtASlidingWindowOnlyWhereOneApplies) {
  auto context = [](const json& j) {
    auto c = ModelConfig::FromJson(j, "config.json");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? c->max_seq_len : -1;
  };
  json j = Qwen3Json();
  j["sliding_window"] = 4096;
  EXPECT_EQ(context(j), 40960);  // use_sliding_window false: transformers drops the window
  j["use_sliding_window"] = true;
  EXPECT_EQ(context(j), 40960);  // max_window_layers 28: no layer of 28 slides
  j["max_window_layers"] = 20;
  EXPECT_EQ(context(j), 4096);
  j["layer_types"] = std::vector<std::string>(28, "full_attention");
  EXPECT_EQ(context(j), 40960);  // layer_types rules over max_window_layers
  j["layer_types"][27] = "sliding_attention";
  EXPECT_EQ(context(j), 4096);

  json mistral = SmallConfig().ToJson();
  mistral["architectures"] = {"MistralForCausalLM"};
  mistral["sliding_window"] = 128;
  EXPECT_EQ(context(mistral), 128);
  mistral["sliding_window"] = nullptr;
  EXPECT_EQ(context(mistral), 256);
}

// Every refusal of a value pdserve does not run names the field (and the file).
TEST(ModelConfigTest, RefusalsOfUnsupportedValuesNameTheField) {
  struct Case {
    std::string what;
    std::function<void(json&)> change;
    StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"Qwen3-MoE", [](json& j) { j["architectures"] = {"Qwen3MoeForCausalLM"}; },
       StatusCode::kUnimplemented,
       "config.json: architecture 'Qwen3MoeForCausalLM' in 'architectures' is a "
       "mixture-of-experts model"},
      {"experts on a dense architecture", [](json& j) { j["num_experts"] = 128; },
       StatusCode::kUnimplemented, "field 'num_experts' = 128: mixture-of-experts"},
      {"Mixtral's experts", [](json& j) { j["num_local_experts"] = 8; }, StatusCode::kUnimplemented,
       "field 'num_local_experts' = 8"},
      {"another activation", [](json& j) { j["hidden_act"] = "gelu"; }, StatusCode::kUnimplemented,
       "field 'hidden_act' = \"gelu\" is not supported"},
      {"an activation of another type", [](json& j) { j["hidden_act"] = 3; },
       StatusCode::kInvalidArgument, "field 'hidden_act' must be a string, got 3"},
      {"MLP biases", [](json& j) { j["mlp_bias"] = true; }, StatusCode::kUnimplemented,
       "field 'mlp_bias' = true"},
      {"partial RoPE", [](json& j) { j["partial_rotary_factor"] = 0.5; },
       StatusCode::kUnimplemented, "field 'partial_rotary_factor' = 0.5"},
      {"YaRN",
       [](json& j) {
         j["rope_scaling"] = {
             {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
       },
       StatusCode::kUnimplemented, "config.json: rope_scaling type 'yarn' is not supported"},
      {"YaRN in rope_parameters",
       [](json& j) {
         j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
       },
       StatusCode::kUnimplemented, "config.json: rope_parameters type 'yarn' is not supported"},
      {"RoPE per layer type",
       [](json& j) {
         j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}}};
       },
       StatusCode::kUnimplemented, "'rope_parameters' per layer type"},
      {"a RoPE factor of another type",
       [](json& j) {
         j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", "big"}};
       },
       StatusCode::kInvalidArgument, "rope_scaling: field 'factor' must be a number"},
      {"a RoPE factor out of range",
       [](json& j) {
         j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", -2}};
       },
       StatusCode::kInvalidArgument, "rope_scaling.factor must be positive, got -2"},
      {"another attention",
       [](json& j) {
         j["layer_types"] = std::vector<std::string>(28, "full_attention");
         j["layer_types"][3] = "linear_attention";
       },
       StatusCode::kUnimplemented, "field 'layer_types' holds \"linear_attention\""},
      {"layer_types of another length", [](json& j) { j["layer_types"] = {"full_attention"}; },
       StatusCode::kInvalidArgument,
       "field 'layer_types' lists 1 layers, but num_hidden_layers is 28"},
      {"a quantized checkpoint",
       [](json& j) {
         j["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}};
       },
       StatusCode::kUnimplemented, "field 'quantization_config' (quant_method \"awq\")"},
      {"a window of another type", [](json& j) { j["sliding_window"] = "wide"; },
       StatusCode::kInvalidArgument, "field 'sliding_window' must be an integer or null"},
      {"use_sliding_window of another type",
       [](json& j) {
         j["sliding_window"] = 4096;
         j["use_sliding_window"] = "yes";
       },
       StatusCode::kInvalidArgument, "field 'use_sliding_window' must be true or false"},
      {"an eps of another type", [](json& j) { j["rms_norm_eps"] = "small"; },
       StatusCode::kInvalidArgument, "field 'rms_norm_eps' must be a number, got \"small\""},
      {"a negative eps", [](json& j) { j["rms_norm_eps"] = -1; }, StatusCode::kInvalidArgument,
       "rms_norm_eps must be a positive number, got -1"},
      {"a negative theta", [](json& j) { j["rope_theta"] = -1; }, StatusCode::kInvalidArgument,
       "rope_theta must be a positive number, got -1"},
      {"tied embeddings of another type", [](json& j) { j["tie_word_embeddings"] = "yes"; },
       StatusCode::kInvalidArgument, "field 'tie_word_embeddings' must be true or false"},
      {"attention_bias of another type", [](json& j) { j["attention_bias"] = 1; },
       StatusCode::kInvalidArgument, "field 'attention_bias' must be true or false, got 1"},
      {"another dtype", [](json& j) { j["torch_dtype"] = "int8"; }, StatusCode::kInvalidArgument,
       "field 'torch_dtype' = \"int8\" is not a dtype pdserve reads"},
      {"another dtype, transformers 5",
       [](json& j) {
         j.erase("torch_dtype");
         j["dtype"] = "float8_e4m3fn";
       },
       StatusCode::kInvalidArgument, "field 'dtype' = \"float8_e4m3fn\""},
      {"an odd head_dim", [](json& j) { j["head_dim"] = 127; }, StatusCode::kInvalidArgument,
       "head_dim (127) must be even"},
  };
  for (const Case& c : cases) {
    json j = Qwen3Json();
    c.change(j);
    auto config = ModelConfig::FromJson(j, "config.json");
    ASSERT_FALSE(config.ok()) << c.what;
    EXPECT_EQ(config.status().code(), c.code) << c.what << ": " << config.status().ToString();
    EXPECT_NE(config.status().message().find(c.message), std::string::npos)
        << c.what << ": " << config.status().message();
    EXPECT_EQ(config.status().message().rfind("config.json: ", 0), 0u) << c.what;
  }
  // A dense model may say it has no experts.
  json j = Qwen3Json();
  j["num_experts"] = 0;
  EXPECT_TRUE(ModelConfig::FromJson(j, "config.json").ok());
}

// Found by tests/fuzz/model_config_fuzz.cc (its seed crash-a27d6e84...): more attention heads
// than hidden_size, without head_dim, loaded with head_dim 0.
TEST(ModelConfigTest, HeadsThatDoNotSplitHiddenSizeNeedAHeadDim) {
  nlohmann::json j = SmallConfig().ToJson();
  j.erase("head_dim");
  j["hidden_size"] = 4096;
  j["num_attention_heads"] = j["num_key_value_heads"] = 32000;
  auto zero = ModelConfig::FromJson(j, "config.json");
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.status().message().find("must be a multiple of num_attention_heads (32000)"),
            std::string::npos)
      << zero.status().ToString();
  j["num_attention_heads"] = j["num_key_value_heads"] = 3;  // 4096 / 3 is not whole
  EXPECT_EQ(ModelConfig::FromJson(j, "config.json").status().code(), StatusCode::kInvalidArgument);
  j["head_dim"] = 128;  // given: any split is the model's own
  auto given = ModelConfig::FromJson(j, "config.json");
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(given->head_dim, 128);
}

// Hugging Face's LlamaConfig (and Mistral's, Qwen2's) default: a config.json without the field
// means 1e-6, not the 1e-5 some checkpoints write out.
TEST(ModelConfigTest, AMissingRmsNormEpsIsHuggingFacesDefault) {
  nlohmann::json j = SmallConfig().ToJson();
  j.erase("rms_norm_eps");
  auto c = ModelConfig::FromJson(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
  j["rms_norm_eps"] = 1e-5;
  EXPECT_FLOAT_EQ(ModelConfig::FromJson(j, "config.json")->rms_norm_eps, 1e-5f);
}

TEST(ModelConfigTest, FieldsOfAnotherTypeOrPastAnyModelAreClearErrors) {
  const nlohmann::json good = SmallConfig().ToJson();
  nlohmann::json j = good;
  j["_name_or_path"] = 5;  // informational: ignored
  EXPECT_TRUE(ModelConfig::FromJson(j, "config.json").ok());
  j = good;
  j["rope_scaling"] = {{"rope_type", 5}};
  auto rope = ModelConfig::FromJson(j, "config.json");
  EXPECT_NE(rope.status().message().find("rope_scaling's type must be a string, got 5"),
            std::string::npos)
      << rope.status().message();
  j = good;
  j["num_hidden_layers"] = 1 << 30;  // once: 309 GB of empty layers, then bad_alloc
  auto layers = ModelConfig::FromJson(j, "config.json");
  EXPECT_NE(layers.status().message().find("num_hidden_layers = 1073741824 is past any model's"),
            std::string::npos)
      << layers.status().message();
  j = good;
  j["num_attention_heads"] = j["num_key_value_heads"] = 1 << 30;  // q_dim overflowed int
  EXPECT_EQ(ModelConfig::FromJson(j, "config.json").status().code(), StatusCode::kInvalidArgument);
  j = good;
  j["head_dim"] = 1 << 14;
  j["num_attention_heads"] = j["num_key_value_heads"] = 1 << 14;  // each alone in range
  auto q = ModelConfig::FromJson(j, "config.json");
  EXPECT_NE(q.status().message().find("num_attention_heads x head_dim"), std::string::npos)
      << q.status().message();
  TempDir dir;
  j = good;
  j.erase("hidden_size");
  std::string text = j.dump();
  text.insert(text.size() - 1, R"(,"hidden_size":)" + NestedJson(100000));
  std::ofstream(dir / "config.json") << text;
  auto deep = ModelConfig::Load(dir.path());
  EXPECT_NE(deep.status().message().find("'hidden_size' must be a positive integer, got an "
                                         "array of 1"),
            std::string::npos)
      << deep.status().message();
}

TEST(ModelConfigTest, UnknownArchitectureAndBadFieldsAreClearErrors) {
  TempDir dir;
  std::ofstream(dir / "config.json")
      << R"({"architectures": ["GPT2LMHeadModel"], "vocab_size": 10})";
  auto c = ModelConfig::Load(dir.path());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("config.json: unknown architecture 'GPT2LMHeadModel'"),
            std::string::npos)
      << c.status().message();

  nlohmann::json j = SmallConfig().ToJson();
  j["num_key_value_heads"] = 3;
  std::ofstream(dir / "config.json") << j.dump();
  EXPECT_EQ(ModelConfig::Load(dir.path()).status().code(), StatusCode::kInvalidArgument);
  j = SmallConfig().ToJson();
  j["hidden_size"] = "big";
  std::ofstream(dir / "config.json") << j.dump();
  auto s = ModelConfig::Load(dir.path());
  EXPECT_NE(s.status().message().find("'hidden_size' must be a positive integer"),
            std::string::npos);
  std::ofstream(dir / "config.json") << "{";
  EXPECT_EQ(ModelConfig::Load(dir.path()).status().code(), StatusCode::kInvalidArgument);
}

TEST(ModelConfigTest, ReadsLlama3RopeScalingQwenBiasAndEosLists) {
  nlohmann::json j = SmallConfig().ToJson();
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  j["eos_token_id"] = {128001, 128009};
  j["architectures"] = {"Qwen2ForCausalLM"};
  j.erase("attention_bias");
  auto c = ModelConfig::FromJson(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->type, "llama3");
  EXPECT_EQ(c->rope_scaling->factor, 8.0);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int>{128001, 128009}));
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_EQ(ModelConfig::FromJson(j, "config.json").status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace pdserve::model
