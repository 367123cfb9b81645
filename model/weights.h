// Weights: views of a Llama-family model's tensors inside mapped safetensors files (one file or
// shards with model.safetensors.index.json), checked against the ModelConfig. Matrices stay in
// their file dtype (f32, bf16 or f16) and are read in place; the small vectors (norms, biases)
// are converted to f32 copies once at load. Immutable after Load: share freely across threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace pdserve::model {

// A row-major matrix [rows][cols] in some dtype: y = W x multiplies by rows.
struct Matrix {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int rows = 0;
  int cols = 0;
  size_t bytes() const { return static_cast<size_t>(rows) * cols * DTypeSize(dtype); }
};

struct LayerWeights {
  std::vector<float> attn_norm;  // [dim]
  Matrix wq;                     // [q_dim][dim]
  Matrix wk;                     // [kv_dim][dim]
  Matrix wv;                     // [kv_dim][dim]
  Matrix wo;                     // [dim][q_dim]
  std::vector<float> bq;         // [q_dim], empty unless attention_bias
  std::vector<float> bk;         // [kv_dim], empty unless attention_bias
  std::vector<float> bv;         // [kv_dim], empty unless attention_bias
  std::vector<float> q_norm;     // [head_dim], each query head's RMSNorm; empty unless qk_norm
  std::vector<float> k_norm;     // [head_dim], each key head's RMSNorm; empty unless qk_norm
  std::vector<float> mlp_norm;   // [dim]
  Matrix w_gate;                 // [hidden_dim][dim]
  Matrix w_up;                   // [hidden_dim][dim]
  Matrix w_down;                 // [dim][hidden_dim]
};

struct Weights {
  Matrix embed;  // [vocab][dim]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [dim]
  Matrix lm_head;                 // [vocab][dim]; the embedding when tie_word_embeddings

  // Bytes of matrices read to produce one token (every layer's projections and the LM head):
  // the numerator of the memory-bandwidth roofline.
  size_t MatrixBytesPerToken() const;
  // Bytes of every matrix, the embedding included (once, when tied).
  size_t MatrixBytes() const;

  // Keeps the mapped files alive as long as the views.
  std::vector<std::shared_ptr<const SafetensorsFile>> files;
  // Matrices converted or copied at load (ConvertedTo, InHugePages) live here.
  std::vector<std::shared_ptr<void>> buffers;
  bool in_huge_pages = false;  // every matrix is in `buffers`' huge pages (InHugePages)

  // Loads and checks every tensor the config needs. Errors name the file and the tensor; a
  // tensor that would change the maths but that the engine does not apply (an o_proj bias) is
  // refused by name.
  static Result<std::shared_ptr<const Weights>> Load(const std::string& model_dir,
                                                     const ModelConfig& config);

  // A copy whose matrices (the embedding and LM head too) hold `dtype`, converted from the file's
  // (f32 to bf16 or f16 rounds to nearest even; the other way is exact) into huge-page memory.
  // Matrices already in `dtype` stay views of the files. Serving an f32 checkpoint in bf16 halves
  // the bytes a decode step reads, as vLLM's --dtype does.
  static std::shared_ptr<const Weights> ConvertedTo(std::shared_ptr<const Weights> weights,
                                                    DType dtype);

  // A copy whose matrices (the embedding and LM head too) sit in huge-page memory
  // (huge_pages.h, one arena) instead of the file maps; matrices ConvertedTo already made are
  // kept, and weights already so are returned as they are. The
  // CPU backend serves from such a copy: decode reads every matrix once per token, and through
  // a file map's 4 KiB pages it misses the TLB every 4 KiB.
  static std::shared_ptr<const Weights> InHugePages(std::shared_ptr<const Weights> weights);
};

}  // namespace pdserve::model
