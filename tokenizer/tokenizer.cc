#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/json_text.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace pdserve::tokenizer {
namespace {

using json = nlohmann::json;

Result<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return DataLoss("cannot read " + path.string());
  return text.str();
}

Result<json> ParseJson(std::string_view text, std::string_view origin) {
  try {
    json value = json::parse(text);
    if (!value.is_object()) return InvalidArgument(std::string(origin) + ": not a JSON object");
    return value;
  } catch (const json::exception& e) {
    return InvalidArgument(std::string(origin) + ": not valid JSON: " + e.what());
  }
}

// tokenizer_config.json writes special tokens as "text" or {"content": "text", ...}.
std::string TokenContent(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return it->value("content", std::string());
  return {};
}

// Ids from a processor's special_tokens entry: {"id": name, "ids": [..], "tokens": [..]}.
Status SpecialTokenIds(const json& processor, const std::string& name, std::vector<int32_t>& out) {
  const json& table = processor.at("special_tokens");
  auto it = table.find(name);
  if (it == table.end()) {
    return InvalidArgument("post_processor names special token \"" + name +
                           "\" but special_tokens has no entry for it");
  }
  for (const json& id : it->at("ids")) out.push_back(id.get<int32_t>());
  return Status::Ok();
}

// The ids that tokenizer.json's post_processor puts before and after a single sequence.
Status ParsePostProcessor(const json& processor, std::vector<int32_t>& prefix,
                          std::vector<int32_t>& suffix) {
  if (processor.is_null()) return Status::Ok();
  std::string type = processor.value("type", std::string());
  if (type == "ByteLevel") return Status::Ok();  // offsets only
  if (type == "Sequence") {
    for (const json& step : processor.at("processors")) {
      PDSERVE_RETURN_IF_ERROR(ParsePostProcessor(step, prefix, suffix));
    }
    return Status::Ok();
  }
  if (type == "TemplateProcessing") {
    bool after_sequence = false;
    for (const json& item : processor.at("single")) {
      if (item.contains("Sequence")) {
        after_sequence = true;
      } else if (item.contains("SpecialToken")) {
        std::string name = item["SpecialToken"].at("id").get<std::string>();
        PDSERVE_RETURN_IF_ERROR(SpecialTokenIds(processor, name, after_sequence ? suffix : prefix));
      } else {
        return InvalidArgument(
            "post_processor.single holds an item that is neither Sequence "
            "nor SpecialToken: " +
            DescribeJson(item));
      }
    }
    return Status::Ok();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    prefix.push_back(processor.at("cls").at(1).get<int32_t>());
    suffix.push_back(processor.at("sep").at(1).get<int32_t>());
    return Status::Ok();
  }
  return Unimplemented("post_processor type \"" + type + "\" is not supported");
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

Result<std::shared_ptr<const Tokenizer>> Tokenizer::Load(const std::string& file_or_model_dir) {
  namespace fs = std::filesystem;
  fs::path path(file_or_model_dir);
  std::error_code error;
  if (!fs::exists(path, error))
    return NotFound("tokenizer: no such file or directory: " + path.string());
  std::string config_text, generation_text;
  ChatTemplateFile template_file;
  if (fs::is_directory(path, error)) {
    fs::path config = path / "tokenizer_config.json";
    if (fs::exists(config, error)) {
      PDSERVE_ASSIGN_OR_RETURN(config_text, ReadFile(config));
    }
    fs::path generation = path / "generation_config.json";
    if (fs::exists(generation, error)) {
      PDSERVE_ASSIGN_OR_RETURN(generation_text, ReadFile(generation));
    }
    // A chat_template.jinja file wins over the config's chat_template, as in transformers.
    fs::path chat_template = path / "chat_template.jinja";
    if (fs::exists(chat_template, error)) {
      PDSERVE_ASSIGN_OR_RETURN(template_file.text, ReadFile(chat_template));
      if (FindInvalidUtf8(template_file.text)) {
        return InvalidArgument(chat_template.string() + ": not UTF-8");
      }
      template_file.path = chat_template.string();
    }
    path /= "tokenizer.json";
  }
  PDSERVE_ASSIGN_OR_RETURN(std::string tokenizer_text, ReadFile(path));
  return FromJsonText(tokenizer_text, config_text, path.string(), generation_text, template_file);
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::FromJsonText(
    std::string_view tokenizer_json, std::string_view config_json, std::string_view origin,
    std::string_view generation_config_json, const ChatTemplateFile& template_file) {
  std::string where(origin);
  PDSERVE_ASSIGN_OR_RETURN(json root, ParseJson(tokenizer_json, where));
  json config = json::object(), generation = json::object();
  if (!config_json.empty()) {
    PDSERVE_ASSIGN_OR_RETURN(config,
                             ParseJson(config_json, "tokenizer_config.json beside " + where));
  }
  if (!generation_config_json.empty()) {
    PDSERVE_ASSIGN_OR_RETURN(
        generation, ParseJson(generation_config_json, "generation_config.json beside " + where));
  }
  std::shared_ptr<Tokenizer> tok(new Tokenizer());
  Status status = [&]() -> Status {
    try {
      return tok->Build(root, config, generation, template_file);
    } catch (const json::exception& e) {
      // A field of the wrong JSON type deep inside (an id that is a string, ...).
      return InvalidArgument(std::string("unexpected JSON structure: ") + e.what());
    }
  }();
  if (!status.ok()) return status.WithContext(where);
  return std::shared_ptr<const Tokenizer>(std::move(tok));
}

Status Tokenizer::Build(const json& root, const json& config, const json& generation,
                        const ChatTemplateFile& template_file) {
  auto model = root.find("model");
  if (model == root.end()) return InvalidArgument("no \"model\" object");
  auto normalizer = Normalizer::FromJson(root.value("normalizer", json()));
  if (!normalizer.ok()) return normalizer.status();
  normalizer_ = std::make_unique<const Normalizer>(std::move(normalizer).value());

  auto pre_tokenizer = PreTokenizer::FromJson(root.value("pre_tokenizer", json()));
  if (!pre_tokenizer.ok()) return pre_tokenizer.status();
  pre_tokenizer_ = std::make_unique<const PreTokenizer>(std::move(pre_tokenizer).value());

  // Without a ByteLevel pre-tokenizer the model works on characters (SentencePiece-style).
  auto bpe = BpeModel::FromJson(*model, pre_tokenizer_->byte_level());
  if (!bpe.ok()) return bpe.status();
  bpe_ = std::move(bpe).value();

  auto decoder = Decoder::FromJson(root.value("decoder", json()), pre_tokenizer_->byte_level());
  if (!decoder.ok()) return decoder.status();
  decoder_ = std::make_unique<const Decoder>(std::move(decoder).value());

  vocab_size_ = bpe_->id_limit();
  std::vector<AddedToken> raw, normalized;
  if (auto list = root.find("added_tokens"); list != root.end() && !list->is_null()) {
    for (const json& entry : *list) {
      AddedToken t;
      t.id = entry.at("id").get<int32_t>();
      t.content = entry.at("content").get<std::string>();
      if (t.id < 0 || t.id >= (1 << 24)) {
        return InvalidArgument("added token \"" + t.content + "\" has id out of range");
      }
      if (FindInvalidUtf8(t.content)) {
        return InvalidArgument("added token with id " + std::to_string(t.id) +
                               " is not valid UTF-8");
      }
      t.special = entry.value("special", false);
      t.lstrip = entry.value("lstrip", false);
      t.rstrip = entry.value("rstrip", false);
      t.single_word = entry.value("single_word", false);
      t.normalized = entry.value("normalized", !t.special);
      vocab_size_ = std::max(vocab_size_, t.id + 1);
      added_by_content_[t.content] = t.id;
      if (t.normalized && !normalizer_->is_identity()) {
        // As in Hugging Face, a normalized token is looked for, and decoded, as the normalizer
        // writes it (with a Prepend "▁" normalizer, "foo" is found as "▁foo").
        PDSERVE_ASSIGN_OR_RETURN(t.content, normalizer_->Apply(t.content));
        added_[t.id] = TokenInfo{t.content, t.special};
        normalized.push_back(std::move(t));
      } else {
        added_[t.id] = TokenInfo{t.content, t.special};
        raw.push_back(std::move(t));
      }
    }
  }
  auto ordinary = [](std::vector<AddedToken> tokens) {
    std::erase_if(tokens, [](const AddedToken& t) { return t.special; });
    return tokens;
  };
  raw_added_[0] = std::make_unique<const AddedTokenMatcher>(ordinary(raw));
  raw_added_[1] = std::make_unique<const AddedTokenMatcher>(std::move(raw));
  normalized_added_[0] = std::make_unique<const AddedTokenMatcher>(ordinary(normalized));
  normalized_added_[1] = std::make_unique<const AddedTokenMatcher>(std::move(normalized));

  PDSERVE_RETURN_IF_ERROR(
      ParsePostProcessor(root.value("post_processor", json()), prefix_ids_, suffix_ids_));
  for (int32_t id : prefix_ids_) {
    if (id < 0 || id >= vocab_size_) return InvalidArgument("post_processor id out of range");
  }
  for (int32_t id : suffix_ids_) {
    if (id < 0 || id >= vocab_size_) return InvalidArgument("post_processor id out of range");
  }

  auto has_token = [this](std::string_view t) { return TokenId(t).has_value(); };
  std::string bos_token = TokenContent(config, "bos_token");
  if (auto id = TokenId(bos_token); !bos_token.empty() && id) {
    bos_id_ = id;
  } else if (!prefix_ids_.empty()) {
    bos_id_ = prefix_ids_.front();
  } else if (config.empty()) {
    for (std::string_view name : {"<|begin_of_text|>", "<s>"}) {
      if (auto id = TokenId(name)) {
        bos_id_ = id;
        break;
      }
    }
  }
  PDSERVE_ASSIGN_OR_RETURN(chat_template_, ChatTemplate::ForModel(config, template_file.text,
                                                                  template_file.path, has_token));

  auto add_eos = [this](int32_t id) {
    if (id >= 0 && id < vocab_size_ &&
        std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end()) {
      eos_ids_.push_back(id);
    }
  };
  if (auto id = TokenId(TokenContent(config, "eos_token"))) add_eos(*id);
  if (auto it = generation.find("eos_token_id"); it != generation.end()) {
    if (it->is_number_integer()) add_eos(it->get<int32_t>());
    if (it->is_array()) {
      for (const json& id : *it) {
        if (id.is_number_integer()) add_eos(id.get<int32_t>());
      }
    }
  }
  if (!eos_ids_.empty()) {
    if (auto turn_end = chat_template_.end_of_turn_token()) {
      if (auto id = TokenId(*turn_end)) add_eos(*id);
    }
  } else {
    for (std::string_view name : {"<|end_of_text|>", "<|eot_id|>", "<|im_end|>", "<|endoftext|>"}) {
      if (auto id = TokenId(name)) add_eos(*id);
    }
    // SentencePiece files' ends, when special (Gemma's vocab also has an HTML "</s>").
    for (std::string_view name : {"</s>", "<eos>", "<end_of_turn>"}) {
      if (auto id = TokenId(name); id && IsSpecial(*id)) add_eos(*id);
    }
  }
  return Status::Ok();
}

Result<std::vector<int32_t>> Tokenizer::Encode(std::string_view text, bool add_special,
                                               bool parse_special) const {
  if (std::optional<size_t> bad = FindInvalidUtf8(text)) {
    return InvalidArgument("text is not valid UTF-8 (bad byte 0x" +
                           [&] {
                             static constexpr char kHex[] = "0123456789abcdef";
                             auto b = static_cast<uint8_t>(text[*bad]);
                             return std::string{kHex[b >> 4], kHex[b & 15]};
                           }() +
                           " at offset " + std::to_string(*bad) + ")");
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + prefix_ids_.size() + suffix_ids_.size() + 1);
  if (add_special) ids = prefix_ids_;
  std::vector<AddedTokenMatcher::Segment> segments;
  raw_added_[parse_special]->Split(text, segments);
  for (const auto& segment : segments) {
    if (segment.token_id >= 0) {
      ids.push_back(segment.token_id);
    } else {
      PDSERVE_RETURN_IF_ERROR(EncodeText(text.substr(segment.begin, segment.end - segment.begin),
                                         parse_special, segment.begin == 0, ids));
    }
  }
  if (add_special) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

Status Tokenizer::EncodeText(std::string_view text, bool parse_special, bool at_origin,
                             std::vector<int32_t>& ids) const {
  if (normalizer_->is_identity()) return EncodeNormalized(text, at_origin, ids);
  PDSERVE_ASSIGN_OR_RETURN(std::string normalized, normalizer_->Apply(text));
  const AddedTokenMatcher& matcher = *normalized_added_[parse_special];
  if (matcher.empty()) return EncodeNormalized(normalized, at_origin, ids);
  std::vector<AddedTokenMatcher::Segment> segments;
  matcher.Split(normalized, segments);
  std::string_view view(normalized);
  for (const auto& segment : segments) {
    if (segment.token_id >= 0) {
      ids.push_back(segment.token_id);
    } else {
      PDSERVE_RETURN_IF_ERROR(
          EncodeNormalized(view.substr(segment.begin, segment.end - segment.begin),
                           at_origin && segment.begin == 0, ids));
    }
  }
  return Status::Ok();
}

Status Tokenizer::EncodeNormalized(std::string_view text, bool at_origin,
                                   std::vector<int32_t>& ids) const {
  if (text.empty()) return Status::Ok();
  std::vector<std::string> pieces;
  PDSERVE_RETURN_IF_ERROR(pre_tokenizer_->Split(text, pieces, at_origin));
  for (const std::string& piece : pieces) bpe_->EncodeWord(piece, ids);
  return Status::Ok();
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string text;
  DecodeStream stream(*decoder_);
  for (int32_t id : ids) {
    if (skip_special && IsSpecial(id)) continue;
    std::string_view token = TokenText(id);
    if (!token.empty()) stream.Add(token, text);  // empty: an id out of range
  }
  stream.Finish(text);
  return text;
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  std::string_view token = TokenText(id);
  return token.empty() ? std::string() : decoder_->TokenBytes(token);
}

std::string_view Tokenizer::TokenText(int32_t id) const {
  if (auto it = added_.find(id); it != added_.end()) return it->second.content;
  return bpe_->Token(id);
}

std::optional<int32_t> Tokenizer::TokenId(std::string_view token) const {
  if (token.empty()) return std::nullopt;
  if (auto it = added_by_content_.find(std::string(token)); it != added_by_content_.end()) {
    return it->second;
  }
  return bpe_->TokenId(token);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  auto it = added_.find(id);
  return it != added_.end() && it->second.special;
}

}  // namespace pdserve::tokenizer
