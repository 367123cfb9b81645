#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/json_text.h"
#include "common/utf8.h"
#include "tokenizer/json_fields.h"

namespace pdserve::tokenizer {
namespace {

using json = nlohmann::json;

bool BoolField(const json& config, const char* name, bool fallback) {
  auto it = config.find(name);
  return it != config.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// Per-thread PCRE2 scratch: match data (only the whole match is read) and a JIT stack big enough
// for long runs of text.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
  MatchScratch() {
    if (stack != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

MatchScratch& Scratch() {
  thread_local MatchScratch scratch;
  return scratch;
}

// Code point at text[pos] (valid UTF-8) and its length.
std::pair<UChar32, size_t> DecodeAt(std::string_view text, size_t pos) {
  int32_t i = static_cast<int32_t>(pos);
  UChar32 c;
  U8_NEXT(reinterpret_cast<const uint8_t*>(text.data()), i, static_cast<int32_t>(text.size()), c);
  return {c, static_cast<size_t>(i) - pos};
}

// Code point that ends at text[end) and where it starts.
std::pair<UChar32, size_t> DecodeBefore(std::string_view text, size_t end) {
  int32_t i = static_cast<int32_t>(end);
  UChar32 c;
  U8_PREV(reinterpret_cast<const uint8_t*>(text.data()), 0, i, c);
  return {c, static_cast<size_t>(i)};
}

bool IsWordChar(UChar32 c) { return c == '_' || u_isalnum(c) || u_isalpha(c); }

// Unicode's White_Space property, a class body: what \s means in the regex engine of Hugging Face
// tokenizers (Oniguruma). PCRE2's \s also takes U+180E MONGOLIAN VOWEL SEPARATOR (white space
// before Unicode 6.3), which put " \u180e" in one piece where Hugging Face makes two.
constexpr std::string_view kWhiteSpaceClass =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// `pattern` with \s spelled as kWhiteSpaceClass, and \S (outside a class) as its complement.
std::string WithUnicodeWhiteSpace(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char escaped = pattern[++i];
      if (escaped == 's' || (escaped == 'S' && !in_class)) {
        if (in_class) {
          out += kWhiteSpaceClass;
        } else {
          out += escaped == 's' ? "[" : "[^";
          out += kWhiteSpaceClass;
          out += ']';
        }
      } else if (escaped == 'Q') {  // \Q...\E quotes: copied as is
        const size_t end = pattern.find("\\E", i + 1);
        const size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out.append(pattern.substr(i - 1, stop - (i - 1)));
        i = stop - 1;
      } else {
        out += c;
        out += escaped;
      }
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // a literal ]
    } else if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t end = pattern.find(":]", i + 2);  // a POSIX class, [:alpha:]
      if (end != std::string_view::npos) {
        out.append(pattern.substr(i + 1, end + 1 - i));
        i = end + 1;
      }
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Regex

Result<std::shared_ptr<const Regex>> Regex::Compile(std::string_view pattern, bool literal) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2_LITERAL refuses PCRE2_UCP ("invalid option bits"), which a literal does not need:
  // every {"String": ...} pattern failed to compile.
  const uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
  const std::string source = literal ? std::string(pattern) : WithUnicodeWhiteSpace(pattern);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                   options, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    return InvalidArgument("bad regex /" + std::string(pattern) + "/ at offset " +
                           std::to_string(offset) + ": " + reinterpret_cast<char*>(message));
  }
  // Without JIT (not built in, or no executable memory) pcre2_match interprets: slower, same.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return std::shared_ptr<const Regex>(new Regex(code));
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Status Regex::FindAll(std::string_view text,
                      std::vector<std::pair<size_t, size_t>>& matches) const {
  MatchScratch& scratch = Scratch();
  auto* code = static_cast<pcre2_code*>(code_);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start < text.size()) {
    int rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, scratch.data,
                         scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      return ResourceExhausted(std::string("regex match failed: ") +
                               reinterpret_cast<char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
    size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      start = end;
    } else {
      // An empty match: step over one character so the scan moves on.
      start = begin + std::max<size_t>(1, DecodeAt(text, begin).second);
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// PreTokenizer

Result<PreTokenizer> PreTokenizer::FromJson(const json& config) {
  PreTokenizer out;
  if (config.is_null()) return out;
  PDSERVE_RETURN_IF_ERROR(AddSteps(config, out));
  return out;
}

Status PreTokenizer::AddSteps(const json& config, PreTokenizer& out) {
  std::string type = ComponentType(config);
  if (type == "Sequence") {
    auto it = config.find("pretokenizers");
    if (it == config.end() || !it->is_array()) {
      return InvalidArgument("pre_tokenizer Sequence has no \"pretokenizers\" array");
    }
    for (const json& step : *it) PDSERVE_RETURN_IF_ERROR(AddSteps(step, out));
    return Status::Ok();
  }
  if (type == "Metaspace") return AddMetaspace(config, out);
  Step step;
  if (type == "ByteLevel") {
    step.add_prefix_space = BoolField(config, "add_prefix_space", true);
    if (BoolField(config, "use_regex", true)) {
      PDSERVE_ASSIGN_OR_RETURN(step.regex, Regex::Compile(kGpt2Pattern, false));
    }
    out.byte_level_ = true;
    out.steps_.push_back(std::move(step));
    return Status::Ok();
  }
  if (type != "Split") {
    return Unimplemented("pre_tokenizer type \"" + type +
                         "\" is not supported (supported: Split, ByteLevel, Metaspace, Sequence)");
  }
  auto pattern = config.find("pattern");
  if (pattern == config.end() || !pattern->is_object()) {
    return InvalidArgument("Split pre_tokenizer has no \"pattern\" object");
  }
  if (auto r = pattern->find("Regex"); r != pattern->end() && r->is_string()) {
    PDSERVE_ASSIGN_OR_RETURN(step.regex, Regex::Compile(r->get<std::string>(), false));
  } else if (auto s = pattern->find("String"); s != pattern->end() && s->is_string()) {
    PDSERVE_ASSIGN_OR_RETURN(step.regex, Regex::Compile(s->get<std::string>(), true));
  } else {
    return InvalidArgument("Split pattern must be {\"Regex\": string} or {\"String\": string}");
  }
  auto behavior_field = config.find("behavior");
  if (behavior_field != config.end() && !behavior_field->is_string()) {
    return InvalidArgument("Split behavior must be a string, not " + DescribeJson(*behavior_field));
  }
  const std::string behavior =
      behavior_field == config.end() ? "Isolated" : behavior_field->get<std::string>();
  if (behavior == "Isolated") {
    step.behavior = Behavior::kIsolated;
  } else if (behavior == "Removed") {
    step.behavior = Behavior::kRemoved;
  } else if (behavior == "MergedWithPrevious") {
    step.behavior = Behavior::kMergedWithPrevious;
  } else if (behavior == "MergedWithNext") {
    step.behavior = Behavior::kMergedWithNext;
  } else if (behavior == "Contiguous") {
    step.behavior = Behavior::kContiguous;
  } else {
    return InvalidArgument("Split behavior \"" + behavior + "\" is unknown");
  }
  step.invert = BoolField(config, "invert", false);
  out.steps_.push_back(std::move(step));
  return Status::Ok();
}

// Metaspace: spaces become the replacement character ("▁"), which is put in front of a piece
// (always, or only at the start of the input) unless already there, and with split the piece is
// cut before each replacement character. The older form's add_prefix_space (default true) means
// prepend_scheme "always" (or "never" when false) unless prepend_scheme is given too.
Status PreTokenizer::AddMetaspace(const json& config, PreTokenizer& out) {
  Step step;
  auto replacement = config.find("replacement");
  if (replacement == config.end() || !replacement->is_string()) {
    return InvalidArgument("Metaspace pre_tokenizer has no \"replacement\" string");
  }
  step.metaspace = replacement->get<std::string>();
  if (step.metaspace.empty() || FindInvalidUtf8(step.metaspace) ||
      Utf8SequenceLength(step.metaspace, 0) != step.metaspace.size()) {
    return InvalidArgument("Metaspace replacement must be one character, not \"" + step.metaspace +
                           "\"");
  }
  step.prepend = BoolField(config, "add_prefix_space", true) ? Prepend::kAlways : Prepend::kNever;
  if (auto scheme = config.find("prepend_scheme"); scheme != config.end() && !scheme->is_null()) {
    const std::string name =
        scheme->is_string() ? scheme->get<std::string>() : DescribeJson(*scheme);
    if (name == "always") {
      step.prepend = Prepend::kAlways;
    } else if (name == "first") {
      step.prepend = Prepend::kFirst;
    } else if (name == "never") {
      step.prepend = Prepend::kNever;
    } else {
      return InvalidArgument("Metaspace prepend_scheme \"" + name +
                             "\" is unknown (always, first, never)");
    }
  }
  if (BoolField(config, "split", true)) {
    PDSERVE_ASSIGN_OR_RETURN(step.regex, Regex::Compile(step.metaspace, /*literal=*/true));
    step.behavior = Behavior::kMergedWithNext;
  }
  out.steps_.push_back(std::move(step));
  return Status::Ok();
}

Status PreTokenizer::ApplyStep(const Step& step, std::vector<std::string>& pieces,
                               bool& at_origin) {
  std::vector<std::string> out;
  out.reserve(pieces.size() * 2);
  std::vector<std::pair<size_t, size_t>> matches;
  bool first_out_at_origin = false;  // whether out[0] starts where pieces[0] starts
  for (size_t index = 0; index < pieces.size(); ++index) {
    std::string& piece = pieces[index];
    if (step.add_prefix_space && (piece.empty() || piece.front() != ' ')) piece.insert(0, 1, ' ');
    if (!step.metaspace.empty()) {
      std::string replaced;
      replaced.reserve(piece.size() + 2 * step.metaspace.size());
      for (char c : piece) {
        if (c == ' ') {
          replaced += step.metaspace;
        } else {
          replaced += c;
        }
      }
      piece = std::move(replaced);
      const bool prepend = step.prepend == Prepend::kAlways ||
                           (step.prepend == Prepend::kFirst && index == 0 && at_origin);
      if (prepend && !piece.starts_with(step.metaspace)) piece.insert(0, step.metaspace);
    }
    if (step.regex == nullptr) {
      if (out.empty()) first_out_at_origin = index == 0;
      out.push_back(std::move(piece));
      continue;
    }
    matches.clear();
    PDSERVE_RETURN_IF_ERROR(step.regex->FindAll(piece, matches));
    // Segments covering the piece, each flagged as a match or a gap.
    struct Part {
      size_t begin, end;
      bool match;
    };
    std::vector<Part> parts;
    size_t last = 0;
    for (auto [b, e] : matches) {
      if (b > last) parts.push_back({last, b, false});
      parts.push_back({b, e, true});
      last = e;
    }
    if (last < piece.size()) parts.push_back({last, piece.size(), false});
    if (step.invert) {
      for (Part& p : parts) p.match = !p.match;
    }
    if (out.empty()) {
      // Every behavior but Removed keeps the first part, where the piece starts.
      first_out_at_origin =
          index == 0 && !(step.behavior == Behavior::kRemoved && !parts.empty() && parts[0].match);
    }
    std::string_view text(piece);
    bool merge_next = false;  // MergedWithNext: the previous match waits for this part
    bool last_was_match = false;
    for (size_t i = 0; i < parts.size(); ++i) {
      const Part& p = parts[i];
      std::string_view s = text.substr(p.begin, p.end - p.begin);
      switch (step.behavior) {
        case Behavior::kIsolated:
          out.emplace_back(s);
          break;
        case Behavior::kRemoved:
          if (!p.match) out.emplace_back(s);
          break;
        case Behavior::kMergedWithPrevious:
          if (p.match && !out.empty() && !last_was_match && &p != &parts.front()) {
            out.back() += s;
          } else {
            out.emplace_back(s);
          }
          break;
        case Behavior::kMergedWithNext:
          if (merge_next) {
            out.back() += s;
          } else {
            out.emplace_back(s);
          }
          // As in Hugging Face, a match joins the part after it only if that is not a match:
          // "a▁▁b" split on "▁" is "a", "▁", "▁b".
          merge_next = p.match && i + 1 < parts.size() && !parts[i + 1].match;
          break;
        case Behavior::kContiguous:
          if (p.match && last_was_match) {
            out.back() += s;
          } else {
            out.emplace_back(s);
          }
          break;
      }
      last_was_match = p.match;
    }
  }
  std::erase_if(out, [](const std::string& s) { return s.empty(); });
  pieces = std::move(out);
  at_origin = at_origin && first_out_at_origin;
  return Status::Ok();
}

Status PreTokenizer::Split(std::string_view text, std::vector<std::string>& pieces,
                           bool at_origin) const {
  std::vector<std::string> current;
  current.emplace_back(text);
  for (const Step& step : steps_) PDSERVE_RETURN_IF_ERROR(ApplyStep(step, current, at_origin));
  for (std::string& piece : current) {
    if (!piece.empty()) pieces.push_back(std::move(piece));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// AddedTokenMatcher

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  std::erase_if(tokens_, [](const AddedToken& t) { return t.content.empty(); });
  lengths_by_first_byte_.resize(256);
  by_content_.reserve(tokens_.size());
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    std::string_view content = tokens_[i].content;
    // A later entry with the same content replaces an earlier one, as in Hugging Face.
    by_content_.insert_or_assign(content, i);
    auto& lengths = lengths_by_first_byte_[static_cast<uint8_t>(content[0])];
    if (std::find(lengths.begin(), lengths.end(), content.size()) == lengths.end()) {
      lengths.push_back(static_cast<uint32_t>(content.size()));
    }
  }
  for (auto& lengths : lengths_by_first_byte_) std::sort(lengths.rbegin(), lengths.rend());
}

void AddedTokenMatcher::Split(std::string_view text, std::vector<Segment>& segments) const {
  if (tokens_.empty()) {
    if (!text.empty()) segments.push_back({0, text.size(), -1});
    return;
  }
  size_t plain_begin = 0;  // start of the plain text not yet emitted
  size_t pos = 0;
  while (pos < text.size()) {
    const AddedToken* found = nullptr;
    for (uint32_t length : lengths_by_first_byte_[static_cast<uint8_t>(text[pos])]) {
      if (length > text.size() - pos) continue;
      auto it = by_content_.find(text.substr(pos, length));
      if (it != by_content_.end()) {
        found = &tokens_[it->second];
        break;
      }
    }
    if (found == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + found->content.size();
    if (found->single_word) {
      bool word_before = begin > 0 && IsWordChar(DecodeBefore(text, begin).first);
      bool word_after = end < text.size() && IsWordChar(DecodeAt(text, end).first);
      if (word_before || word_after) {
        pos = end;  // like HF, a rejected match is not retried at inner positions
        continue;
      }
    }
    if (found->lstrip) {
      while (begin > plain_begin) {
        auto [c, start] = DecodeBefore(text, begin);
        if (!u_isUWhiteSpace(c)) break;
        begin = start;
      }
    }
    if (found->rstrip) {
      while (end < text.size()) {
        auto [c, len] = DecodeAt(text, end);
        if (!u_isUWhiteSpace(c)) break;
        end += len;
      }
    }
    if (begin > plain_begin) segments.push_back({plain_begin, begin, -1});
    segments.push_back({begin, end, found->id});
    plain_begin = pos = end;
  }
  if (plain_begin < text.size()) segments.push_back({plain_begin, text.size(), -1});
}

}  // namespace pdserve::tokenizer
