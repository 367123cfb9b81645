#include "model/backend.h"

#include <algorithm>

namespace pdserve::model {

int ForwardBatch::num_tokens() const {
  int n = 0;
  for (const auto& c : chunks) n += static_cast<int>(c.tokens.size());
  return n;
}

int ForwardBatch::num_logit_rows() const {
  if (all_logits) return num_tokens();
  int n = 0;
  for (const auto& c : chunks) n += c.want_logits ? 1 : 0;
  return n;
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
