#include "model/weights.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/huge_pages.h"

namespace pdserve::model {
namespace {

namespace fs = std::filesystem;

// Where each tensor name lives: one safetensors file, or a sharded set with an index.
class TensorIndex {
 public:
  static Result<TensorIndex> Open(const std::string& model_dir) {
    TensorIndex index;
    fs::path dir(model_dir);
    fs::path index_path = dir / "model.safetensors.index.json";
    if (fs::exists(index_path)) {
      std::ifstream in(index_path);
      auto j = nlohmann::json::parse(in, nullptr, false);
      if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
        return InvalidArgument(index_path.string() + ": not a safetensors index (no weight_map)");
      }
      std::map<std::string, std::shared_ptr<const SafetensorsFile>> shards;
      for (const auto& [name, file] : j["weight_map"].items()) {
        if (!file.is_string()) return InvalidArgument(index_path.string() + ": bad entry " + name);
        std::string shard = file.get<std::string>();
        if (shard.find('/') != std::string::npos) {
          return InvalidArgument(index_path.string() + ": shard name '" + shard +
                                 "' must be a file in the model directory");
        }
        auto& opened = shards[shard];
        if (!opened) {
          auto f = SafetensorsFile::Open((dir / shard).string());
          if (!f.ok()) return f.status().WithContext("tensor '" + name + "'");
          opened = *f;
          index.files_.push_back(opened);
        }
        index.by_name_[name] = opened;
      }
      return index;
    }
    fs::path single = dir / "model.safetensors";
    if (!fs::exists(single)) {
      return NotFound(model_dir + ": no model.safetensors or model.safetensors.index.json");
    }
    PDSERVE_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open(single.string()));
    index.files_.push_back(f);
    for (const auto& [name, view] : f->tensors()) index.by_name_[name] = f;
    return index;
  }

  // Finds `name` and checks its shape; the error names the file and the tensor.
  Result<TensorView> Get(const std::string& name, std::vector<int64_t> shape) const {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      std::string where = files_.size() == 1 ? files_[0]->path() : "model.safetensors.index.json";
      return NotFound(where + ": missing tensor '" + name + "'");
    }
    const TensorView* view = it->second->Find(name);
    if (!view) {
      return NotFound(it->second->path() + ": tensor '" + name +
                      "' is in the index but not in the file");
    }
    if (view->shape != shape) {
      TensorView want{nullptr, view->dtype, shape};
      return InvalidArgument(it->second->path() + ": tensor '" + name + "' has shape " +
                             view->ShapeString() + ", expected " + want.ShapeString());
    }
    return *view;
  }

  bool Has(const std::string& name) const { return by_name_.count(name) > 0; }
  // The file that holds `name` (Has(name) must be true).
  const std::string& PathOf(const std::string& name) const { return by_name_.at(name)->path(); }
  std::vector<std::shared_ptr<const SafetensorsFile>> files() const { return files_; }

 private:
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> by_name_;
};

Result<Matrix> GetMatrix(const TensorIndex& index, const std::string& name, int rows, int cols) {
  PDSERVE_ASSIGN_OR_RETURN(TensorView v, index.Get(name, {rows, cols}));
  return Matrix{v.data, v.dtype, rows, cols};
}

Result<std::vector<float>> GetVector(const TensorIndex& index, const std::string& name, int n) {
  PDSERVE_ASSIGN_OR_RETURN(TensorView v, index.Get(name, {n}));
  std::vector<float> out(n);
  ConvertToFloat(v.dtype, v.data, out.data(), n);
  return out;
}

// Row `row` of `src` (any dtype) as `dtype` at dst.
void ConvertRow(const Matrix& src, int row, DType dtype, std::vector<float>& scratch, void* dst) {
  const size_t n = static_cast<size_t>(src.cols);
  scratch.resize(n);
  ConvertToFloat(src.dtype, static_cast<const uint8_t*>(src.data) + row * n * DTypeSize(src.dtype),
                 scratch.data(), n);
  ConvertFromFloat(scratch.data(), dtype, dst, n);
}

// `m` converted to `dtype` in a new buffer (kept in `buffers`); m itself when already so.
Matrix ConvertMatrix(const Matrix& m, DType dtype, std::vector<std::shared_ptr<void>>* buffers) {
  if (m.dtype == dtype || m.rows == 0) return m;
  const size_t row_bytes = static_cast<size_t>(m.cols) * DTypeSize(dtype);
  std::shared_ptr<void> buffer = AllocateHugePageBuffer(m.rows * row_bytes);
  auto* out = static_cast<uint8_t*>(buffer.get());
#pragma omp parallel
  {
    std::vector<float> scratch;
#pragma omp for schedule(static)
    for (int r = 0; r < m.rows; ++r) ConvertRow(m, r, dtype, scratch, out + r * row_bytes);
  }
  buffers->push_back(std::move(buffer));
  return Matrix{out, dtype, m.rows, m.cols};
}

// Whether m is one of `buffers` (a matrix ConvertedTo made).
bool OwnsMatrix(const std::vector<std::shared_ptr<void>>& buffers, const Matrix& m) {
  return std::any_of(buffers.begin(), buffers.end(),
                     [&](const auto& b) { return b.get() == m.data; });
}

// dst <- src, in slices on every thread: the copy reads the file at the page cache's speed.
void ParallelCopy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kSlice = 4u << 20;
  const int64_t slices = static_cast<int64_t>((bytes + kSlice - 1) / kSlice);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < slices; ++i) {
    const size_t begin = i * kSlice;
    std::memcpy(static_cast<uint8_t*>(dst) + begin, static_cast<const uint8_t*>(src) + begin,
                std::min(kSlice, bytes - begin));
  }
}

// Calls fn on every matrix of w once: the embedding, the LM head unless it is the embedding
// (tied), and each layer's projections. W is Weights or const Weights. Returns whether tied.
template <typename W, typename Fn>
bool ForEachMatrix(W& w, Fn fn) {
  const bool tied = w.lm_head.data == w.embed.data;
  fn(w.embed);
  if (!tied) fn(w.lm_head);
  for (auto& l : w.layers) {
    for (auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) fn(*m);
  }
  return tied;
}

// A copy of `weights` with every matrix replaced by fn(matrix, &copy's buffers); a tied LM head
// stays the embedding, made once.
template <typename Fn>
std::shared_ptr<Weights> WithEachMatrix(const Weights& weights, Fn fn) {
  auto w = std::make_shared<Weights>(weights);
  if (ForEachMatrix(*w, [&](Matrix& m) { m = fn(m, &w->buffers); })) w->lm_head = w->embed;
  return w;
}

}  // namespace

std::shared_ptr<const Weights> Weights::InHugePages(std::shared_ptr<const Weights> weights) {
  if (weights->in_huge_pages) return weights;
  // One arena for every matrix still in the file maps, each at a 4 KiB boundary: a 2 MiB
  // buffer per matrix would round each small one (a K or V projection) up to 2 MiB.
  constexpr size_t kAlign = 4096;
  auto rounded = [](size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; };
  size_t total = 0;
  ForEachMatrix(*weights, [&](const Matrix& m) {
    if (!OwnsMatrix(weights->buffers, m)) total += rounded(m.bytes());
  });
  std::shared_ptr<void> arena = total > 0 ? AllocateHugePageBuffer(total) : nullptr;
  size_t used = 0;
  auto w = WithEachMatrix(*weights, [&](const Matrix& m, auto* buffers) {
    if (OwnsMatrix(*buffers, m) || m.rows == 0) return m;
    void* at = static_cast<uint8_t*>(arena.get()) + used;
    ParallelCopy(at, m.data, m.bytes());
    used += rounded(m.bytes());
    return Matrix{at, m.dtype, m.rows, m.cols};
  });
  if (arena) w->buffers.push_back(std::move(arena));
  w->in_huge_pages = true;
  return w;
}

std::shared_ptr<const Weights> Weights::ConvertedTo(std::shared_ptr<const Weights> weights,
                                                    DType dtype) {
  return WithEachMatrix(*weights, [dtype](const Matrix& m, auto* buffers) {
    return ConvertMatrix(m, dtype, buffers);
  });
}

size_t Weights::MatrixBytes() const {
  size_t bytes = 0;
  ForEachMatrix(*this, [&](const Matrix& m) { bytes += m.bytes(); });
  return bytes;
}

size_t Weights::MatrixBytesPerToken() const {
  size_t bytes = lm_head.bytes();
  for (const LayerWeights& l : layers) {
    bytes += l.wq.bytes() + l.wk.bytes() + l.wv.bytes() + l.wo.bytes() + l.w_gate.bytes() +
             l.w_up.bytes() + l.w_down.bytes();
  }
  return bytes;
}

Result<std::shared_ptr<const Weights>> Weights::Load(const std::string& model_dir,
                                                     const ModelConfig& c) {
  PDSERVE_ASSIGN_OR_RETURN(TensorIndex index, TensorIndex::Open(model_dir));
  auto w = std::make_shared<Weights>();
  w->files = index.files();
  PDSERVE_ASSIGN_OR_RETURN(w->embed,
                           GetMatrix(index, "model.embed_tokens.weight", c.vocab_size, c.dim));
  w->layers.resize(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights& l = w->layers[i];
    PDSERVE_ASSIGN_OR_RETURN(l.attn_norm, GetVector(index, p + "input_layernorm.weight", c.dim));
    PDSERVE_ASSIGN_OR_RETURN(l.wq,
                             GetMatrix(index, p + "self_attn.q_proj.weight", c.q_dim(), c.dim));
    PDSERVE_ASSIGN_OR_RETURN(l.wk,
                             GetMatrix(index, p + "self_attn.k_proj.weight", c.kv_dim(), c.dim));
    PDSERVE_ASSIGN_OR_RETURN(l.wv,
                             GetMatrix(index, p + "self_attn.v_proj.weight", c.kv_dim(), c.dim));
    PDSERVE_ASSIGN_OR_RETURN(l.wo,
                             GetMatrix(index, p + "self_attn.o_proj.weight", c.dim, c.q_dim()));
    if (c.attention_bias) {
      PDSERVE_ASSIGN_OR_RETURN(l.bq, GetVector(index, p + "self_attn.q_proj.bias", c.q_dim()));
      PDSERVE_ASSIGN_OR_RETURN(l.bk, GetVector(index, p + "self_attn.k_proj.bias", c.kv_dim()));
      PDSERVE_ASSIGN_OR_RETURN(l.bv, GetVector(index, p + "self_attn.v_proj.bias", c.kv_dim()));
    }
    if (c.qk_norm) {
      PDSERVE_ASSIGN_OR_RETURN(l.q_norm,
                               GetVector(index, p + "self_attn.q_norm.weight", c.head_dim));
      PDSERVE_ASSIGN_OR_RETURN(l.k_norm,
                               GetVector(index, p + "self_attn.k_norm.weight", c.head_dim));
    }
    // LlamaAttention (and Qwen3's) with attention_bias adds one to the output projection too.
    if (const std::string bo = p + "self_attn.o_proj.bias"; index.Has(bo)) {
      return Unimplemented(index.PathOf(bo) + ": tensor '" + bo +
                           "': an output projection bias is not supported");
    }
    PDSERVE_ASSIGN_OR_RETURN(l.mlp_norm,
                             GetVector(index, p + "post_attention_layernorm.weight", c.dim));
    PDSERVE_ASSIGN_OR_RETURN(l.w_gate,
                             GetMatrix(index, p + "mlp.gate_proj.weight", c.hidden_dim, c.dim));
    PDSERVE_ASSIGN_OR_RETURN(l.w_up,
                             GetMatrix(index, p + "mlp.up_proj.weight", c.hidden_dim, c.dim));
    PDSERVE_ASSIGN_OR_RETURN(l.w_down,
                             GetMatrix(index, p + "mlp.down_proj.weight", c.dim, c.hidden_dim));
  }
  PDSERVE_ASSIGN_OR_RETURN(w->final_norm, GetVector(index, "model.norm.weight", c.dim));
  if (c.tie_word_embeddings && !index.Has("lm_head.weight")) {
    w->lm_head = w->embed;
  } else {
    PDSERVE_ASSIGN_OR_RETURN(w->lm_head, GetMatrix(index, "lm_head.weight", c.vocab_size, c.dim));
  }
  return std::shared_ptr<const Weights>(std::move(w));
}

}  // namespace pdserve::model
