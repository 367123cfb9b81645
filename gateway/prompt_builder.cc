#include "gateway/prompt_builder.h"

#include <algorithm>

namespace pdserve::gateway {

std::variant<BuiltPrompt, PromptRefusal> PromptBuilder::Build(const GenerationRequest& req) const {
  auto refuse = [](ApiError e, int retry_after_s = 0) {
    return PromptRefusal{std::move(e), retry_after_s};
  };
  Result<std::vector<int32_t>> prompt = std::vector<int32_t>();
  const bool chat = req.endpoint == Endpoint::kChatCompletions;
  const char* prompt_param = chat ? "messages" : "prompt";
  if (chat) {
    std::vector<tokenizer::ChatMessage> messages;
    for (auto& m : req.messages) {
      messages.push_back({m.role == "developer" ? "system" : m.role, m.content, m.tool_calls_json,
                          m.tool_call_id, m.name});
    }
    auto text =
        tokenizer_->chat_template().Apply(messages, /*add_generation_prompt=*/true, req.tools_json);
    if (!text.ok()) {
      return refuse(ApiError::BadRequest(text.status().message(),
                                         req.tools_json.empty() ? "messages" : "tools"));
    }
    prompt = tokenizer_->Encode(*text, /*add_special=*/false);
  } else if (req.prompt_token_ids) {
    for (int32_t id : *req.prompt_token_ids) {
      if (id >= tokenizer_->vocab_size()) {
        return refuse(ApiError::BadRequest(
            "token id " + std::to_string(id) + " is outside the vocabulary", "prompt"));
      }
    }
    prompt = *req.prompt_token_ids;
  } else {
    prompt = tokenizer_->Encode(req.prompt, /*add_special=*/true);
  }
  if (!prompt.ok()) return refuse(ApiError::BadRequest(prompt.status().message(), prompt_param));
  const int prompt_len = static_cast<int>(prompt->size());
  if (prompt_len == 0) return refuse(ApiError::BadRequest("The prompt is empty", prompt_param));
  const std::string context = "This model's maximum context length is " +
                              std::to_string(max_context_) + " tokens; the prompt has " +
                              std::to_string(prompt_len);
  if (prompt_len >= max_context_) {
    ApiError e = ApiError::TooLarge(context, prompt_param);
    e.code = "context_length_exceeded";
    return refuse(e);
  }
  const int room = max_context_ - prompt_len;
  if (req.max_tokens && *req.max_tokens > room) {
    return refuse(ApiError::BadRequest(
        context + " and max_tokens asks for " + std::to_string(*req.max_tokens), "max_tokens"));
  }
  BuiltPrompt built;
  built.max_tokens = req.max_tokens.value_or(room);
  built.choices = std::max(1, req.n);
  built.prompt = std::move(prompt).value();
  return built;
}

std::optional<PromptRefusal> PromptBuilder::Charge(const std::string& tenant,
                                                   BuiltPrompt& built) const {
  if (!quota_ || tenant.empty()) return std::nullopt;
  const int64_t tokens =
      static_cast<int64_t>(built.prompt.size()) + int64_t{built.choices} * built.max_tokens;
  const QuotaDecision quota = quota_->Admit(tenant, tokens);
  if (!quota.admitted) {
    metrics_->RecordRejected("rate_limit");
    ApiError e = ApiError::RateLimited(quota.message);
    e.type = quota.limit;  // as OpenAI: "requests" or "tokens"
    return PromptRefusal{e, quota.retry_after_s};
  }
  built.quota_tokens = tokens;
  return std::nullopt;
}

}  // namespace pdserve::gateway
