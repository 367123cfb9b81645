#include "tests/fakes/fake_backend.h"

#include <string>

namespace pdserve::model {

FakeBackend::FakeBackend(const ModelConfig& config, int num_pages, int page_size)
    : config_(config) {
  shape_.n_layers = config.n_layers;
  shape_.num_pages = num_pages;
  shape_.page_size = page_size;
  shape_.n_kv_heads = config.n_kv_heads;
  shape_.head_dim = config.head_dim;
  shape_.dtype = DType::kF32;
  kv_.assign(config.n_layers, std::vector<float>(shape_.layer_elems(), 0.0f));
}

Status FakeBackend::Run(const ForwardBatch& batch, std::vector<int32_t>* next) {
  for (const SequenceChunk& c : batch.chunks) {
    const size_t end = c.start_pos + c.tokens.size();
    if (c.tokens.empty() || c.pages.size() * shape_.page_size < end) {
      return InvalidArgument("a chunk's pages do not cover its tokens");
    }
    for (int32_t t : c.tokens) {
      if (t < 0 || t >= config_.vocab_size) return InvalidArgument("token id out of range");
    }
    for (int32_t p : c.pages) {
      if (p < 0 || p >= shape_.num_pages) return OutOfRange("page id out of range");
    }
  }
  for (int l = 0; l < shape_.n_layers; ++l) {
    for (const SequenceChunk& c : batch.chunks) {
      for (size_t i = 0; i < c.tokens.size(); ++i) {
        const int pos = c.start_pos + static_cast<int>(i);
        const int page = c.pages[pos / shape_.page_size], slot = pos % shape_.page_size;
        kv_[l][shape_.Offset(page, 0, slot)] = static_cast<float>(c.tokens[i]);
        kv_[l][shape_.Offset(page, 1, slot)] = static_cast<float>(pos);
      }
    }
    if (batch.after_layer_kv) batch.after_layer_kv(l);
  }
  next->clear();
  for (const SequenceChunk& c : batch.chunks) {
    if (batch.all_logits) {
      for (int32_t t : c.tokens) next->push_back((t + 1) % config_.vocab_size);
    } else if (c.want_logits) {
      next->push_back((c.tokens.back() + 1) % config_.vocab_size);
    }
  }
  return Status::Ok();
}

Status FakeBackend::Forward(const ForwardBatch& batch, std::vector<float>* logits) {
  ++forward_calls_;
  std::vector<int32_t> next;
  PDSERVE_RETURN_IF_ERROR(Run(batch, &next));
  logits->assign(next.size() * config_.vocab_size, 0.0f);
  // Far above the rest: sampling at any temperature the engine allows picks it.
  for (size_t r = 0; r < next.size(); ++r) (*logits)[r * config_.vocab_size + next[r]] = 1e4f;
  return Status::Ok();
}

Status FakeBackend::ForwardGreedy(const ForwardBatch& batch, std::vector<int32_t>* tokens) {
  ++greedy_calls_;
  return Run(batch, tokens);
}

}  // namespace pdserve::model
