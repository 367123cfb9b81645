#include "model/backend.h"

#include <algorithm>
#include <string>

namespace pdserve::model {

int ForwardBatch::num_tokens() const {
  int n = 0;
  for (const auto& c : chunks) n += static_cast<int>(c.tokens.size());
  return n;
}

int ForwardBatch::num_logit_rows() const {
  if (all_logits) return num_tokens();
  int n = 0;
  for (const auto& c : chunks) {
    n += c.all_logits ? static_cast<int>(c.tokens.size()) : (c.want_logits ? 1 : 0);
  }
  return n;
}

StepShape ForwardBatch::Shape() const {
  StepShape shape;
  for (const auto& c : chunks) {
    if (c.decode) {
      AddDecodeToken(shape, c.start_pos);
    } else {
      AddPromptChunk(shape, c.start_pos, static_cast<int>(c.tokens.size()));
    }
  }
  return shape;
}

Status ValidateBatch(const ForwardBatch& batch, const ModelConfig& config,
                     const KvCacheShape& shape) {
  for (const auto& c : batch.chunks) {
    if (c.tokens.empty()) return InvalidArgument("a sequence chunk has no tokens");
    const int end = c.start_pos + static_cast<int>(c.tokens.size());
    if (c.start_pos < 0 || end > config.max_seq_len) {
      return OutOfRange("positions up to " + std::to_string(end) + " exceed the context of " +
                        std::to_string(config.max_seq_len) + " tokens");
    }
    if (static_cast<int>(c.pages.size()) < PagesForTokens(end, shape.page_size)) {
      return InvalidArgument("block table of " + std::to_string(c.pages.size()) +
                             " pages does not cover " + std::to_string(end) + " tokens");
    }
    for (int32_t p : c.pages) {
      if (p < 0 || p >= shape.num_pages) {
        return InvalidArgument("page id " + std::to_string(p) + " is outside the pool");
      }
    }
    for (int32_t t : c.tokens) {
      if (t < 0 || t >= config.vocab_size) {
        return InvalidArgument("token id " + std::to_string(t) + " is outside the vocabulary of " +
                               std::to_string(config.vocab_size));
      }
    }
  }
  return Status::Ok();
}

Status Backend::ForwardGreedy(const ForwardBatch& batch, std::vector<int32_t>* tokens) {
  std::vector<float> logits;
  PDSERVE_RETURN_IF_ERROR(Forward(batch, &logits));
  const int vocab = config().vocab_size;
  const int rows = batch.num_logit_rows();
  tokens->resize(rows);
  for (int r = 0; r < rows; ++r) {
    const float* row = logits.data() + static_cast<size_t>(r) * vocab;
    (*tokens)[r] = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
  }
  return Status::Ok();
}

}  // namespace pdserve::model
