// PromptBuilder: from a parsed OpenAI request to the prompt a call serves. Renders a chat
// request through the model's chat template and tokenizes it (a completion's text is tokenized
// with the tokenizer's special tokens; its token ids are checked against the vocabulary),
// checks the prompt and max_tokens against the context, and (Charge) charges the tenant's quota for
// the prompt and max_tokens. Every refusal is the client's error: 400 for a bad prompt or
// max_tokens, 413 past the context, 429 over the quota (with Retry-After). Immutable once made;
// any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "gateway/api_error.h"
#include "gateway/gateway_metrics.h"
#include "gateway/openai_request.h"
#include "gateway/tenant_quota.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::gateway {

struct BuiltPrompt {
  std::vector<int32_t> prompt;
  int max_tokens = 0;        // the request's, else the context's room after the prompt
  int choices = 1;           // OpenAI's n: the quota counts max_tokens for each
  int64_t quota_tokens = 0;  // what the tenant's quota was charged (0: nothing)
};

struct PromptRefusal {
  ApiError error;
  int retry_after_s = 0;  // > 0: a Retry-After header
};

class PromptBuilder {
 public:
  // `quota` null: none charged; `metrics` counts quota refusals.
  PromptBuilder(std::shared_ptr<const tokenizer::Tokenizer> tokenizer, int max_context,
                std::shared_ptr<TenantQuota> quota, std::shared_ptr<GatewayMetrics> metrics)
      : tokenizer_(std::move(tokenizer)),
        max_context_(max_context),
        quota_(std::move(quota)),
        metrics_(std::move(metrics)) {}

  // The prompt and max_tokens (quota_tokens 0), or the 400 or 413 that says what is wrong.
  std::variant<BuiltPrompt, PromptRefusal> Build(const GenerationRequest& request) const;
  // Charges the tenant's quota for the prompt and max_tokens (sets quota_tokens); the 429 when
  // it is over. `tenant` "": nothing charged (no authentication).
  std::optional<PromptRefusal> Charge(const std::string& tenant, BuiltPrompt& built) const;

 private:
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  int max_context_;
  std::shared_ptr<TenantQuota> quota_;
  std::shared_ptr<GatewayMetrics> metrics_;
};

}  // namespace pdserve::gateway
