// FakeBackend: a Backend (model/backend.h) that does no arithmetic, for tests of what drives a
// backend (the engine's scheduling, a worker) without a model: the next token after `t` is
// (t + 1) % vocab_size, as one-hot logits from Forward and as ids from ForwardGreedy, which it
// claims to run on the device (greedy_on_device) so that the engine's device-greedy path runs
// too (Forward's row is far above the rest, so sampling picks the same). Each chunk's tokens are
// written into its KV pages (the K row of a token holds its id, its V row its position), so a test
// can see where KV landed. It counts its calls. Driven by one thread, like every Backend.
#pragma once

#include <vector>

#include "model/backend.h"

namespace pdserve::model {

class FakeBackend final : public Backend {
 public:
  // `config` needs vocab_size, n_layers, n_kv_heads and head_dim.
  FakeBackend(const ModelConfig& config, int num_pages, int page_size);

  const ModelConfig& config() const override { return config_; }
  const KvCacheShape& kv_shape() const override { return shape_; }
  std::string device() const override { return "fake"; }
  Status Forward(const ForwardBatch& batch, std::vector<float>* logits) override;
  void* KvLayerData(int layer) override { return kv_[layer].data(); }
  bool greedy_on_device() const override { return true; }
  Status ForwardGreedy(const ForwardBatch& batch, std::vector<int32_t>* tokens) override;

  int forward_calls() const { return forward_calls_; }
  int greedy_calls() const { return greedy_calls_; }

 private:
  // Checks the batch, writes its KV, calls after_layer_kv; the next token of each logit row.
  Status Run(const ForwardBatch& batch, std::vector<int32_t>* next);

  ModelConfig config_;
  KvCacheShape shape_;
  std::vector<std::vector<float>> kv_;  // [n_layers][layer_elems]
  int forward_calls_ = 0, greedy_calls_ = 0;
};

}  // namespace pdserve::model
