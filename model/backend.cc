#include "model/backend.h"

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

}  // namespace pdserve::model
