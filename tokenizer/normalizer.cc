#include "tokenizer/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <nlohmann/json.hpp>

#include "tokenizer/json_fields.h"

namespace pdserve::tokenizer {
using json = nlohmann::json;

Result<Normalizer> Normalizer::FromJson(const json& config) {
  Normalizer out;
  if (config.is_null()) return out;
  PDSERVE_RETURN_IF_ERROR(AddSteps(config, out));
  return out;
}

Status Normalizer::AddSteps(const json& config, Normalizer& out) {
  const std::string type = ComponentType(config);
  if (type == "Sequence") {
    auto it = config.find("normalizers");
    if (it == config.end() || !it->is_array()) {
      return InvalidArgument("normalizer Sequence has no \"normalizers\" array");
    }
    for (const json& step : *it) PDSERVE_RETURN_IF_ERROR(AddSteps(step, out));
    return Status::Ok();
  }
  Step step;
  if (type == "Prepend") {
    const std::string* prepend = StringField(config, "prepend");
    if (prepend == nullptr) return InvalidArgument("Prepend normalizer has no \"prepend\" string");
    step.prepend = true;
    step.content = *prepend;
    out.steps_.push_back(std::move(step));
    return Status::Ok();
  }
  if (type == "Replace") {
    auto pattern = config.find("pattern");
    const std::string* content = StringField(config, "content");
    if (pattern == config.end() || !pattern->is_object() || content == nullptr) {
      return InvalidArgument(
          "Replace normalizer needs a \"pattern\" object and a \"content\" string");
    }
    const std::string* literal = StringField(*pattern, "String");
    if (literal == nullptr) {
      return Unimplemented("Replace normalizer: only {\"String\": ...} patterns are supported");
    }
    if (literal->empty()) return InvalidArgument("Replace normalizer has an empty pattern");
    step.pattern = *literal;
    step.content = *content;
    out.steps_.push_back(std::move(step));
    return Status::Ok();
  }
  UErrorCode error = U_ZERO_ERROR;
  if (type == "NFC") {
    step.form = icu::Normalizer2::getNFCInstance(error);
  } else if (type == "NFD") {
    step.form = icu::Normalizer2::getNFDInstance(error);
  } else if (type == "NFKC") {
    step.form = icu::Normalizer2::getNFKCInstance(error);
  } else if (type == "NFKD") {
    step.form = icu::Normalizer2::getNFKDInstance(error);
  } else {
    return Unimplemented("normalizer type \"" + type +
                         "\" is not supported (supported: null, NFC, NFD, NFKC, NFKD, Prepend, "
                         "Replace, Sequence)");
  }
  if (U_FAILURE(error) || step.form == nullptr) {
    return Internal(std::string("ICU cannot load normalizer ") + type + ": " + u_errorName(error));
  }
  out.steps_.push_back(std::move(step));
  return Status::Ok();
}

Result<std::string> Normalizer::Apply(std::string_view text) const {
  std::string current(text);
  for (const Step& step : steps_) {
    if (step.prepend) {
      if (!current.empty()) current.insert(0, step.content);
      continue;
    }
    if (!step.pattern.empty()) {
      // Both are valid UTF-8, so a match never starts or ends inside a character.
      if (current.find(step.pattern) == std::string::npos) continue;
      std::string next;
      next.reserve(current.size());
      size_t from = 0;
      for (size_t at; (at = current.find(step.pattern, from)) != std::string::npos;) {
        next.append(current, from, at - from);
        next += step.content;
        from = at + step.pattern.size();
      }
      next.append(current, from, std::string::npos);
      current = std::move(next);
      continue;
    }
    const auto* form = static_cast<const icu::Normalizer2*>(step.form);
    icu::StringPiece piece(current.data(), static_cast<int32_t>(current.size()));
    UErrorCode error = U_ZERO_ERROR;
    if (form->isNormalizedUTF8(piece, error) && U_SUCCESS(error)) continue;
    error = U_ZERO_ERROR;
    std::string next;
    icu::StringByteSink<std::string> sink(&next, static_cast<int32_t>(current.size()));
    form->normalizeUTF8(0, piece, sink, nullptr, error);
    if (U_FAILURE(error)) {
      return InvalidArgument(std::string("Unicode normalization failed: ") + u_errorName(error));
    }
    current = std::move(next);
  }
  return current;
}

}  // namespace pdserve::tokenizer
