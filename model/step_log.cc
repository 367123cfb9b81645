#include "model/step_log.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <type_traits>

namespace pdserve::model {

Result<std::unique_ptr<StepLog>> StepLog::Open(const std::string& path) {
  std::ofstream out(path, std::ios::app);
  if (!out) return InvalidArgument("cannot open step log '" + path + "' to append to it");
  return std::unique_ptr<StepLog>(new StepLog(std::move(out)));
}

void StepLog::Write(const StepSample& step, Clock::time_point start) {
  nlohmann::json line = {{"prompt_tokens", step.shape.prompt_tokens},
                         {"prompt_attention", step.shape.prompt_attention},
                         {"decode_tokens", step.shape.decode_tokens},
                         {"decode_context", step.shape.decode_context},
                         {"max_context", step.shape.max_context},
                         {"seconds", step.seconds}};
  if (last_end_ != Clock::time_point{}) {
    line["gap_seconds"] = std::max(0.0, std::chrono::duration<double>(start - last_end_).count());
  }
  last_end_ = start + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(step.seconds));
  out_ << line.dump() << '\n';
  out_.flush();
}

namespace {

// One line's step; the error says what is wrong with it.
Result<LoggedStep> ParseStep(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument("not a JSON object");
  LoggedStep logged;
  StepSample& step = logged.step;
  auto integer = [&](const char* key, auto* out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer() || it->template get<int64_t>() < 0) {
      return InvalidArgument(std::string("'") + key + "' must be a whole number of at least 0");
    }
    *out = it->template get<std::remove_pointer_t<decltype(out)>>();
    return Status::Ok();
  };
  PDSERVE_RETURN_IF_ERROR(integer("prompt_tokens", &step.shape.prompt_tokens));
  PDSERVE_RETURN_IF_ERROR(integer("prompt_attention", &step.shape.prompt_attention));
  PDSERVE_RETURN_IF_ERROR(integer("decode_tokens", &step.shape.decode_tokens));
  PDSERVE_RETURN_IF_ERROR(integer("decode_context", &step.shape.decode_context));
  PDSERVE_RETURN_IF_ERROR(integer("max_context", &step.shape.max_context));
  auto seconds = j.find("seconds");
  if (seconds == j.end() || !seconds->is_number() || !std::isfinite(seconds->get<double>()) ||
      seconds->get<double>() <= 0) {
    return InvalidArgument("'seconds' must be a number above 0");
  }
  step.seconds = seconds->get<double>();
  if (auto gap = j.find("gap_seconds"); gap != j.end()) {
    if (!gap->is_number() || !std::isfinite(gap->get<double>()) || gap->get<double>() < 0) {
      return InvalidArgument("'gap_seconds' must be a number of at least 0");
    }
    logged.gap_seconds = gap->get<double>();
  }
  return logged;
}

}  // namespace

Result<std::vector<LoggedStep>> ReadStepLog(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read step log '" + path + "'");
  std::vector<LoggedStep> steps;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto step = ParseStep(text);
    if (!step.ok()) {
      return InvalidArgument(path + ":" + std::to_string(line) + ": " + step.status().message());
    }
    steps.push_back(*step);
  }
  return steps;
}

}  // namespace pdserve::model
