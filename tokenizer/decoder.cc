#include "tokenizer/decoder.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/json_text.h"
#include "common/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"

namespace pdserve::tokenizer {
namespace {

using json = nlohmann::json;

constexpr std::string_view kReplacementCharacter = "\xef\xbf\xbd";  // U+FFFD

bool IsOneCharacter(std::string_view s) {
  return !s.empty() && !FindInvalidUtf8(s) && Utf8SequenceLength(s, 0) == s.size();
}

// A field that Hugging Face reads as one `char`.
Result<std::string> CharacterField(const json& config, const char* name, const std::string& type) {
  const std::string* value = StringField(config, name);
  if (value == nullptr || !IsOneCharacter(*value)) {
    return InvalidArgument(type + " decoder: \"" + name + "\" must be a one-character string");
  }
  return *value;
}

Result<size_t> CountField(const json& config, const char* name, const std::string& type) {
  auto it = config.find(name);
  if (it == config.end() || it->is_null()) return size_t{0};
  if (!it->is_number_integer() || it->get<int64_t>() < 0) {
    return InvalidArgument(type + " decoder: \"" + name + "\" must be a count, not " +
                           DescribeJson(*it));
  }
  return it->get<size_t>();
}

void ReplaceAll(std::string& text, std::string_view from, std::string_view to) {
  if (text.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(text.size());
  size_t start = 0;
  for (size_t at; (at = text.find(from, start)) != std::string::npos; start = at + from.size()) {
    out.append(text, start, at - start);
    out += to;
  }
  out.append(text, start, std::string::npos);
  text = std::move(out);
}

// ByteFallback's test, as Hugging Face writes it: six bytes "<0x" XX ">", XX parsed the way
// Rust's u8::from_str_radix(XX, 16) does (so "+A" counts too).
bool IsByteToken(std::string_view token, char& byte) {
  if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return false;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int high = token[3] == '+' ? 0 : hex(token[3]), low = hex(token[4]);
  if (high < 0 || low < 0) return false;
  byte = static_cast<char>(high * 16 + low);
  return true;
}

// ByteLevel: a spelling made of GPT-2's byte symbols stands for those bytes; any other (an
// added token with a character outside them) for its own text.
void AppendByteLevelBytes(std::string_view token, std::string& out) {
  if (std::optional<std::string> bytes = SymbolsToBytes(token)) {
    out += *bytes;
  } else {
    out += token;
  }
}

// Metaspace's replacement and whether it is dropped from the first token, with the same
// fields and defaults as the Metaspace pre-tokenizer.
Status ParseMetaspace(const json& config, std::string& replacement, bool& drop_in_first) {
  PDSERVE_ASSIGN_OR_RETURN(replacement, CharacterField(config, "replacement", "Metaspace"));
  auto flag = config.find("add_prefix_space");
  drop_in_first = flag == config.end() || !flag->is_boolean() || flag->get<bool>();
  if (auto scheme = config.find("prepend_scheme"); scheme != config.end() && !scheme->is_null()) {
    const std::string name =
        scheme->is_string() ? scheme->get<std::string>() : DescribeJson(*scheme);
    if (name != "always" && name != "first" && name != "never") {
      return InvalidArgument("Metaspace decoder: prepend_scheme \"" + name + "\" is unknown");
    }
    drop_in_first = name != "never";
  }
  return Status::Ok();
}

}  // namespace

Result<Decoder> Decoder::FromJson(const json& config, bool byte_level_default) {
  Decoder out;
  if (config.is_null()) {
    out.kind_ = byte_level_default ? Kind::kByteLevel : Kind::kJoinWithSpace;
    return out;
  }
  out.kind_ = Kind::kPieces;
  bool fused = false, fallback = false;
  PDSERVE_RETURN_IF_ERROR(AddSteps(config, out, fused, fallback));
  if (out.kind_ == Kind::kByteLevel &&
      (fused || fallback || !out.before_fallback_.empty() || !out.after_fuse_.empty())) {
    return Unimplemented("decoder: ByteLevel together with other steps is not supported");
  }
  out.byte_fallback_ = fallback;
  return out;
}

Status Decoder::AddSteps(const json& config, Decoder& out, bool& fused, bool& fallback) {
  const std::string type = ComponentType(config);
  if (type == "Sequence") {
    auto it = config.find("decoders");
    if (it == config.end() || !it->is_array()) {
      return InvalidArgument("decoder Sequence has no \"decoders\" array");
    }
    for (const json& step : *it) PDSERVE_RETURN_IF_ERROR(AddSteps(step, out, fused, fallback));
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    out.kind_ = Kind::kByteLevel;
    return Status::Ok();
  }
  if (type == "Fuse") {
    fused = true;
    return Status::Ok();
  }
  if (type == "ByteFallback") {
    if (fused || fallback) {
      return Unimplemented("decoder: ByteFallback after Fuse or a second ByteFallback");
    }
    fallback = true;
    return Status::Ok();
  }
  Step step;
  if (type == "Replace") {
    auto pattern = config.find("pattern");
    const std::string* content = StringField(config, "content");
    if (pattern == config.end() || !pattern->is_object() || content == nullptr) {
      return InvalidArgument("Replace decoder needs a \"pattern\" object and a \"content\" string");
    }
    const std::string* literal = StringField(*pattern, "String");
    if (literal == nullptr) {
      return Unimplemented("Replace decoder: only {\"String\": ...} patterns are supported");
    }
    if (literal->empty()) return InvalidArgument("Replace decoder has an empty pattern");
    if (fused && !IsOneCharacter(*literal)) {
      return Unimplemented("decoder: Replace after Fuse of more than one character");
    }
    step.type = Step::kReplace;
    step.from = *literal;
    step.to = *content;
  } else if (type == "Strip") {
    step.type = Step::kStrip;
    PDSERVE_ASSIGN_OR_RETURN(step.from, CharacterField(config, "content", type));
    PDSERVE_ASSIGN_OR_RETURN(step.start, CountField(config, "start", type));
    PDSERVE_ASSIGN_OR_RETURN(step.stop, CountField(config, "stop", type));
    if (fused && step.stop > 0) {
      return Unimplemented("decoder: Strip of the end (stop > 0) after Fuse is not supported");
    }
  } else if (type == "Metaspace") {
    if (fused) return Unimplemented("decoder: Metaspace after Fuse is not supported");
    step.type = Step::kMetaspace;
    PDSERVE_RETURN_IF_ERROR(ParseMetaspace(config, step.from, step.drop_in_first));
    step.to = " ";
  } else {
    return Unimplemented("decoder type \"" + type +
                         "\" is not supported (supported: null, ByteLevel, Replace, ByteFallback, "
                         "Fuse, Strip, Metaspace, Sequence)");
  }
  (fused      ? out.after_fuse_
   : fallback ? out.after_fallback_
              : out.before_fallback_)
      .push_back(std::move(step));
  return Status::Ok();
}

std::string Decoder::ApplySteps(const std::vector<Step>& steps, std::string token, bool first) {
  for (const Step& step : steps) {
    switch (step.type) {
      case Step::kReplace:
        ReplaceAll(token, step.from, step.to);
        break;
      case Step::kMetaspace:
        ReplaceAll(token, step.from, first && step.drop_in_first ? "" : step.to);
        break;
      case Step::kStrip: {
        size_t begin = 0, end = token.size();
        for (size_t i = 0; i < step.start && end - begin >= step.from.size() &&
                           token.compare(begin, step.from.size(), step.from) == 0;
             ++i) {
          begin += step.from.size();
        }
        for (size_t i = 0; i < step.stop && end - begin >= step.from.size() &&
                           token.compare(end - step.from.size(), step.from.size(), step.from) == 0;
             ++i) {
          end -= step.from.size();
        }
        token = token.substr(begin, end - begin);
        break;
      }
    }
  }
  return token;
}

std::string Decoder::TokenBytes(std::string_view token) const {
  std::string bytes;
  switch (kind_) {
    case Kind::kJoinWithSpace:
      bytes = " ";
      bytes += token;
      return bytes;
    case Kind::kByteLevel:
      AppendByteLevelBytes(token, bytes);
      return bytes;
    case Kind::kPieces:
      break;
  }
  bytes = ApplySteps(before_fallback_, std::string(token), false);
  if (char byte; byte_fallback_ && IsByteToken(bytes, byte)) return std::string(1, byte);
  bytes = ApplySteps(after_fallback_, std::move(bytes), false);
  for (const Step& step : after_fuse_) {
    if (step.type == Step::kReplace) ReplaceAll(bytes, step.from, step.to);
  }
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// DecodeStream

void DecodeStream::Add(std::string_view token, std::string& out) {
  const Decoder& d = *decoder_;
  const bool first = tokens_++ == 0;
  switch (d.kind_) {
    case Decoder::Kind::kJoinWithSpace:
      if (!first) out += ' ';
      out += token;
      return;
    case Decoder::Kind::kByteLevel: {
      AppendByteLevelBytes(token, pending_);
      // Everything but a tail that more bytes could still complete is final: converting it now
      // gives the same text (U+FFFD included) as converting the whole sequence at the end.
      const size_t held = IncompleteUtf8Suffix(pending_);
      AppendUtf8Lossy(std::string_view(pending_).substr(0, pending_.size() - held), out);
      pending_.erase(0, pending_.size() - held);
      return;
    }
    case Decoder::Kind::kPieces:
      break;
  }
  std::string piece = Decoder::ApplySteps(d.before_fallback_, std::string(token), first);
  if (char byte; d.byte_fallback_ && IsByteToken(piece, byte)) {
    pending_ += byte;
    return;
  }
  EndByteRun(out);
  EmitPiece(std::move(piece), out);
}

void DecodeStream::Finish(std::string& out) {
  if (decoder_->kind_ == Decoder::Kind::kByteLevel) {
    AppendUtf8Lossy(pending_, out);
    pending_.clear();
    return;
  }
  EndByteRun(out);
}

void DecodeStream::EndByteRun(std::string& out) {
  if (pending_.empty()) return;
  std::string run = std::move(pending_);
  pending_.clear();
  if (!FindInvalidUtf8(run)) {
    EmitPiece(std::move(run), out);
    return;
  }
  for (size_t i = 0; i < run.size(); ++i) EmitPiece(std::string(kReplacementCharacter), out);
}

void DecodeStream::EmitPiece(std::string piece, std::string& out) {
  EmitText(Decoder::ApplySteps(decoder_->after_fallback_, std::move(piece), pieces_++ == 0), out);
}

void DecodeStream::EmitText(std::string_view text, std::string& out) {
  const std::vector<Decoder::Step>& steps = decoder_->after_fuse_;
  if (steps.empty()) {
    out += text;
    return;
  }
  if (stripped_.size() != steps.size()) {
    stripped_.resize(steps.size());
    for (size_t i = 0; i < steps.size(); ++i) stripped_[i] = steps[i].start;
  }
  std::string current(text);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Decoder::Step& step = steps[i];
    if (step.type == Decoder::Step::kReplace) {
      ReplaceAll(current, step.from, step.to);
      continue;
    }
    // Strip at the start of the whole text: up to `start` leading `from` characters, however
    // the text is cut into pieces; the first other character ends it.
    size_t& left = stripped_[i];
    size_t begin = 0;
    while (left > 0 && current.compare(begin, step.from.size(), step.from) == 0) {
      begin += step.from.size();
      --left;
    }
    if (begin < current.size()) left = 0;
    current.erase(0, begin);
  }
  out += current;
}

}  // namespace pdserve::tokenizer
