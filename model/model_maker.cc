#include "model/model_maker.h"

#include <unistd.h>
#include <cmath>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_writer.h"

namespace pdserve::model {
namespace {

namespace fs = std::filesystem;

// A counter-based normal generator (splitmix64 + Box-Muller): the same numbers on every
// platform and standard library, so a seed names one model everywhere.
class NormalStream {
 public:
  explicit NormalStream(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x1234567ull) {}
  double Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = (static_cast<double>(NextBits() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(NextBits() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2 * M_PI * u2);
  }

 private:
  uint64_t NextBits() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

TensorToWrite RandomTensor(const std::string& name, std::vector<int64_t> shape, DType dtype,
                           NormalStream& rng, double mean, double stddev) {
  TensorToWrite t{name, dtype, std::move(shape), {}};
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  t.bytes.resize(static_cast<size_t>(n) * DTypeSize(dtype));
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(mean + stddev * rng.Next());
    if (dtype == DType::kF32) {
      std::memcpy(t.bytes.data() + i * 4, &v, 4);
    } else {
      const uint16_t h = dtype == DType::kBF16 ? FloatToBF16(v) : FloatToF16(v);
      std::memcpy(t.bytes.data() + i * 2, &h, 2);
    }
  }
  return t;
}

Status WriteJson(const fs::path& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out.flush()) return Unavailable(path.string() + ": write failed");
  return Status::Ok();
}

// Copies a real model's tokenizer files from `from` into `to` and sizes `c`'s vocabulary (rounded
// up to 64 rows) and special ids to that tokenizer.
Status CopyTokenizer(const std::string& from, const std::string& to, ModelConfig* c) {
  PDSERVE_ASSIGN_OR_RETURN(auto tokenizer, tokenizer::Tokenizer::Load(from));
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                           "special_tokens_map.json"}) {
    const fs::path source = fs::path(from) / name;
    if (!fs::exists(source)) continue;
    std::error_code ec;
    fs::copy_file(source, fs::path(to) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return Unavailable(source.string() + ": cannot copy: " + ec.message());
  }
  c->vocab_size = (tokenizer->vocab_size() + 63) / 64 * 64;
  c->bos_token_id.reset();
  if (tokenizer->bos_id()) c->bos_token_id = *tokenizer->bos_id();
  c->eos_token_ids.assign(tokenizer->eos_ids().begin(), tokenizer->eos_ids().end());
  if (c->eos_token_ids.empty()) {
    return InvalidArgument(from +
                           ": the tokenizer names no eos token (tokenizer_config.json's "
                           "eos_token or generation_config.json's eos_token_id)");
  }
  return Status::Ok();
}

}  // namespace

const std::vector<std::string>& PresetNames() {
  static const std::vector<std::string> names = {"tiny", "small", "llama3-8b", "qwen3-tiny",
                                                 "qwen3-0.6b"};
  return names;
}

Result<ModelConfig> PresetConfig(const std::string& preset) {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 500000.0;
  if (preset == "tiny") {
    c.dim = 128, c.hidden_dim = 384, c.n_layers = 4, c.n_heads = 4, c.n_kv_heads = 2;
    c.max_seq_len = 4096;
    c.tie_word_embeddings = false;
  } else if (preset == "small") {
    c.dim = 768, c.hidden_dim = 2048, c.n_layers = 12, c.n_heads = 12, c.n_kv_heads = 4;
    c.max_seq_len = 8192;
    c.tie_word_embeddings = true;
    c.vocab_size = 32000;
  } else if (preset == "llama3-8b") {  // Llama-3-8B's shape: about 8.0B parameters, 16 GB in bf16
    c.dim = 4096, c.hidden_dim = 14336, c.n_layers = 32, c.n_heads = 32, c.n_kv_heads = 8;
    c.max_seq_len = 8192;
    c.tie_word_embeddings = false;
    c.vocab_size = 128256;
  } else if (preset == "qwen3-tiny" || preset == "qwen3-0.6b") {
    c.architecture = "Qwen3ForCausalLM";
    c.qk_norm = true;
    c.rms_norm_eps = 1e-6f;
    c.rope_theta = 1000000.0;
    c.tie_word_embeddings = true;
    if (preset == "qwen3-tiny") {
      // As Qwen3-0.6B, heads twice as wide as hidden_size / num_attention_heads.
      c.dim = 128, c.hidden_dim = 384, c.n_layers = 4, c.n_heads = 4, c.n_kv_heads = 2;
      c.head_dim = 64;
      c.max_seq_len = 4096;
    } else {  // Qwen3-0.6B's shape: about 0.6B parameters, 1.2 GB in bf16
      c.dim = 1024, c.hidden_dim = 3072, c.n_layers = 28, c.n_heads = 16, c.n_kv_heads = 8;
      c.head_dim = 128;
      c.max_seq_len = 40960;
      c.vocab_size = 151936;
    }
  } else {
    return InvalidArgument("unknown preset '" + preset +
                           "' (tiny, small, llama3-8b, qwen3-tiny or qwen3-0.6b)");
  }
  if (c.head_dim == 0) c.head_dim = c.dim / c.n_heads;
  return c;
}

Status WriteRandomWeights(const ModelConfig& c, const std::string& dir, uint64_t seed, DType dtype,
                          int shards) {
  NormalStream rng(seed);
  std::vector<TensorToWrite> tensors;
  // Scaled so activations stay of order one through the layers and logits are spread out.
  const double in_std = 1.0 / std::sqrt(static_cast<double>(c.dim));
  const double hidden_std = 1.0 / std::sqrt(static_cast<double>(c.hidden_dim));
  const double q_std = 1.0 / std::sqrt(static_cast<double>(c.q_dim()));
  tensors.push_back(
      RandomTensor("model.embed_tokens.weight", {c.vocab_size, c.dim}, dtype, rng, 0, 1));
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    tensors.push_back(RandomTensor(p + "input_layernorm.weight", {c.dim}, dtype, rng, 1, 0.1));
    tensors.push_back(
        RandomTensor(p + "self_attn.q_proj.weight", {c.q_dim(), c.dim}, dtype, rng, 0, in_std));
    tensors.push_back(
        RandomTensor(p + "self_attn.k_proj.weight", {c.kv_dim(), c.dim}, dtype, rng, 0, in_std));
    tensors.push_back(
        RandomTensor(p + "self_attn.v_proj.weight", {c.kv_dim(), c.dim}, dtype, rng, 0, in_std));
    if (c.attention_bias) {
      tensors.push_back(RandomTensor(p + "self_attn.q_proj.bias", {c.q_dim()}, dtype, rng, 0, 0.1));
      tensors.push_back(
          RandomTensor(p + "self_attn.k_proj.bias", {c.kv_dim()}, dtype, rng, 0, 0.1));
      tensors.push_back(
          RandomTensor(p + "self_attn.v_proj.bias", {c.kv_dim()}, dtype, rng, 0, 0.1));
    }
    if (c.qk_norm) {
      tensors.push_back(
          RandomTensor(p + "self_attn.q_norm.weight", {c.head_dim}, dtype, rng, 1, 0.1));
      tensors.push_back(
          RandomTensor(p + "self_attn.k_norm.weight", {c.head_dim}, dtype, rng, 1, 0.1));
    }
    tensors.push_back(
        RandomTensor(p + "self_attn.o_proj.weight", {c.dim, c.q_dim()}, dtype, rng, 0, q_std));
    tensors.push_back(
        RandomTensor(p + "post_attention_layernorm.weight", {c.dim}, dtype, rng, 1, 0.1));
    tensors.push_back(
        RandomTensor(p + "mlp.gate_proj.weight", {c.hidden_dim, c.dim}, dtype, rng, 0, in_std));
    tensors.push_back(
        RandomTensor(p + "mlp.up_proj.weight", {c.hidden_dim, c.dim}, dtype, rng, 0, in_std));
    tensors.push_back(
        RandomTensor(p + "mlp.down_proj.weight", {c.dim, c.hidden_dim}, dtype, rng, 0, hidden_std));
  }
  tensors.push_back(RandomTensor("model.norm.weight", {c.dim}, dtype, rng, 1, 0.1));
  if (!c.tie_word_embeddings) {
    tensors.push_back(RandomTensor("lm_head.weight", {c.vocab_size, c.dim}, dtype, rng, 0, in_std));
  }

  const fs::path out(dir);
  std::error_code ec;
  fs::remove(out / "model.safetensors", ec);
  fs::remove(out / "model.safetensors.index.json", ec);
  if (shards <= 1) {
    std::vector<const TensorToWrite*> all;
    for (const auto& t : tensors) all.push_back(&t);
    return WriteSafetensors((out / "model.safetensors").string(), all);
  }
  // Round-robin tensors over shards, as large checkpoints split by size.
  nlohmann::json weight_map = nlohmann::json::object();
  size_t total = 0;
  for (int s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
    std::vector<const TensorToWrite*> part;
    for (size_t i = s; i < tensors.size(); i += shards) {
      part.push_back(&tensors[i]);
      weight_map[tensors[i].name] = name;
      total += tensors[i].bytes.size();
    }
    PDSERVE_RETURN_IF_ERROR(WriteSafetensors((out / name).string(), part));
  }
  return WriteJson(out / "model.safetensors.index.json",
                   {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}});
}

Status MakeModel(const MakeModelOptions& o) {
  PDSERVE_ASSIGN_OR_RETURN(ModelConfig c, PresetConfig(o.preset));
  if (!o.architecture.empty()) {
    if (o.architecture != "LlamaForCausalLM" && o.architecture != "Qwen2ForCausalLM" &&
        o.architecture != "MistralForCausalLM" && o.architecture != "Qwen3ForCausalLM") {
      return InvalidArgument("unknown architecture '" + o.architecture +
                             "' (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM or "
                             "Qwen3ForCausalLM)");
    }
    c.architecture = o.architecture;
    c.attention_bias = o.architecture == "Qwen2ForCausalLM";
    c.qk_norm = o.architecture == "Qwen3ForCausalLM";
  }
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) return Unavailable(o.out_dir + ": cannot create: " + ec.message());
  if (o.tokenizer_dir.empty()) {
    // Round the embedding up to a multiple of 64 rows, as real checkpoints pad their
    // vocabularies; the tokenizer pads with reserved special tokens to match.
    c.vocab_size = std::max(c.vocab_size, (tokenizer::kByteLevelMinVocabSize + 63) / 64 * 64);
    PDSERVE_ASSIGN_OR_RETURN(c.vocab_size,
                             tokenizer::WriteByteLevelTokenizer(o.out_dir, c.vocab_size));
    c.bos_token_id = tokenizer::kByteLevelBosId;
    c.eos_token_ids = {tokenizer::kByteLevelEndOfTextId, tokenizer::kByteLevelEotId};
  } else {
    PDSERVE_RETURN_IF_ERROR(CopyTokenizer(o.tokenizer_dir, o.out_dir, &c));
  }
  c.dtype = o.dtype;
  c.model_id = "pdserve-" + o.preset;
  nlohmann::json config = c.ToJson();
  config["_name_or_path"] = c.model_id;
  config["pdserve_preset"] = o.preset;
  config["pdserve_seed"] = o.seed;
  PDSERVE_RETURN_IF_ERROR(WriteJson(fs::path(o.out_dir) / "config.json", config));
  nlohmann::json generation = {{"eos_token_id", c.eos_token_ids}};
  if (c.bos_token_id) generation["bos_token_id"] = *c.bos_token_id;
  PDSERVE_RETURN_IF_ERROR(WriteJson(fs::path(o.out_dir) / "generation_config.json", generation));
  return WriteRandomWeights(c, o.out_dir, o.seed, o.dtype, o.shards);
}

Result<std::string> EnsureBuiltinModel() {
  fs::path home;
  if (const char* h = std::getenv("PDSERVE_HOME"); h && *h) {
    home = h;
  } else if (const char* u = std::getenv("HOME"); u && *u) {
    home = fs::path(u) / ".cache" / "pdserve";
  } else {
    home = fs::temp_directory_path() / "pdserve";
  }
  const fs::path dir = home / "models" / "tiny";
  if (fs::exists(dir / "config.json") && fs::exists(dir / "model.safetensors") &&
      fs::exists(dir / "tokenizer.json")) {
    return dir.string();
  }
  // Build in a scratch directory and rename, so concurrent first runs never see half a model.
  const fs::path scratch = home / "models" / ("tiny.tmp." + std::to_string(::getpid()));
  MakeModelOptions options;
  options.out_dir = scratch.string();
  PDSERVE_RETURN_IF_ERROR(MakeModel(options));
  std::error_code ec;
  fs::rename(scratch, dir, ec);
  if (ec) {
    fs::remove_all(scratch, ec);
    if (!fs::exists(dir / "tokenizer.json"))
      return Unavailable(dir.string() + ": cannot create built-in model");
  }
  return dir.string();
}

}  // namespace pdserve::model
