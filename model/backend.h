// Backend: runs the model's forward pass for one engine step over a mixed batch (prompt chunks
// of any length and single decoding tokens together), reading and writing the paged KV cache it
// owns. Implementations: CpuBackend (cpu_backend.h) and, when built with CUDA, the CUDA backend;
// CreateBackend (backend_factory.h) makes the one a device string names.
// A Backend is owned and driven by one thread (the engine's); KvLayerData pointers may be
// handed to a KV transport that writes pages the engine has reserved but does not run yet.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/kv_pool.h"
#include "model/model_config.h"
#include "model/performance_profile.h"

namespace pdserve::model {

// One sequence's share of a step: `tokens` at positions start_pos.. whose KV is computed now.
struct SequenceChunk {
  std::span<const int32_t> tokens;
  int start_pos = 0;
  std::span<const int32_t> pages;  // block table; must cover start_pos + tokens.size() tokens
  bool want_logits = true;         // logits of the chunk's last token
  bool decode = false;             // one generated token being decoded (not prompt work)
  bool all_logits = false;         // logits of each of its tokens (a prompt's logprobs)
};

struct ForwardBatch {
  std::vector<SequenceChunk> chunks;
  // Logits of every token instead of each chunk's last (tests and scoring).
  bool all_logits = false;
  // Called on the engine's thread as soon as layer `layer`'s KV of every chunk is in the cache
  // (before the rest of the layer runs), so a prefill worker can push it while later layers
  // compute. Optional.
  std::function<void(int layer)> after_layer_kv;

  int num_tokens() const;
  int num_logit_rows() const;
  // Whether token i of `chunk` (one of this batch's) has a row of logits; rows come in batch
  // order.
  bool HasLogitRow(const SequenceChunk& chunk, int i) const {
    return all_logits || chunk.all_logits ||
           (chunk.want_logits && i == static_cast<int>(chunk.tokens.size()) - 1);
  }
  // The step's work as the performance profile's step-time model counts it.
  StepShape Shape() const;
};

// What every backend refuses in a batch: an empty chunk, positions past the context, a block
// table that does not cover the chunk or names pages outside the pool, token ids outside the
// vocabulary (InvalidArgument/OutOfRange, naming the value).
Status ValidateBatch(const ForwardBatch& batch, const ModelConfig& config,
                     const KvCacheShape& shape);

// A simulated backend's KV pages hold no real values: what a real worker's KV transfer would
// move and how fast, so that its transport can take as long (model/sim/sim_backend.h).
struct SimulatedKv {
  double bytes_per_token_layer = 0;  // one token's K and V of one layer, in the real model
  double bytes_per_second = 0;       // 0: instant
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const ModelConfig& config() const = 0;
  virtual const KvCacheShape& kv_shape() const = 0;
  virtual std::string device() const = 0;  // "cpu", "cuda:0"

  // Runs one step. `logits` gets num_logit_rows() rows of vocab_size floats, in chunk order.
  // Refuses (InvalidArgument/OutOfRange) token ids, positions or pages out of range.
  virtual Status Forward(const ForwardBatch& batch, std::vector<float>* logits) = 0;

  // The start of one layer's page pool (host or device memory), for KV transports.
  virtual void* KvLayerData(int layer) = 0;

  // Whether ForwardGreedy picks tokens where the logits are (a GPU), so that only token ids
  // cross to the host: the engine then calls it for steps whose rows are all greedy.
  virtual bool greedy_on_device() const { return false; }
  // Forward, then the greedy token of every logit row (the rows Forward would return; lowest id
  // among equal maxima, as Sampler). Here: Forward's logits, argmax on the host.
  virtual Status ForwardGreedy(const ForwardBatch& batch, std::vector<int32_t>* tokens);
  // Null but for a simulated backend.
  virtual const SimulatedKv* simulated_kv() const { return nullptr; }
};

}  // namespace pdserve::model
