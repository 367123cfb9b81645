// The sampling a model's authors recommend, from its generation_config.json: what a request that
// sets none of temperature, top_p, top_k or max_tokens gets, as vLLM and SGLang apply it. Read
// once by the gateway at start; the values are plain data, safe to share.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"

namespace pdserve::gateway {

struct SamplingDefaults {
  float temperature = 1.0f;  // OpenAI's defaults where the file says nothing
  float top_p = 1.0f;
  int top_k = 0;                  // 0: all tokens
  std::optional<int> max_tokens;  // max_new_tokens; absent: up to the context
};

// The defaults of `model_dir`'s generation_config.json: its temperature, top_p, top_k and
// max_new_tokens, each where present (do_sample is not read: like vLLM, the values the file
// gives are the recommendation, also where the file's own do_sample is false). A missing file
// gives OpenAI's defaults; a value of the wrong type or out of the API's range is an error
// naming the file and the field. Fields pdserve does not sample with (repetition_penalty,
// min_p) are left out.
Result<SamplingDefaults> LoadSamplingDefaults(const std::string& model_dir);

// The same from the file's text; `origin` names it in errors.
Result<SamplingDefaults> ParseSamplingDefaults(const std::string& json_text,
                                               const std::string& origin);

}  // namespace pdserve::gateway
