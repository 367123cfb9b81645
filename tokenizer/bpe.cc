#include "tokenizer/bpe.h"

#include <algorithm>
#include <mutex>
#include <nlohmann/json.hpp>

#include "common/utf8.h"
#include "tokenizer/byte_level.h"

namespace pdserve::tokenizer {
namespace {

using json = nlohmann::json;

// Ids past this are refused: a corrupt file must not make us allocate gigabytes.
constexpr int64_t kMaxTokenId = 1 << 24;
// Words longer than this are not cached (rare, and they would crowd out common ones).
constexpr size_t kMaxCachedWordBytes = 256;

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

bool BoolField(const json& config, const char* name) {
  auto it = config.find(name);
  return it != config.end() && it->is_boolean() && it->get<bool>();
}

// How byte_fallback spells a byte: "<0x0A>", upper-case hex.
std::string ByteFallbackToken(uint8_t byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  return std::string{'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
}

}  // namespace

// Encoded words by their bytes. Sharded so concurrent encoders rarely wait on one lock; each
// shard is simply emptied when full, which keeps memory bounded without LRU bookkeeping.
class BpeModel::WordCache {
 public:
  bool Lookup(std::string_view word, std::vector<int32_t>& ids) const {
    const Shard& shard = ShardOf(word);
    std::lock_guard lock(shard.mutex);
    auto it = shard.words.find(word);
    if (it == shard.words.end()) return false;
    ids.insert(ids.end(), it->second.begin(), it->second.end());
    return true;
  }
  void Insert(std::string_view word, std::span<const int32_t> ids) const {
    Shard& shard = ShardOf(word);
    std::lock_guard lock(shard.mutex);
    if (shard.words.size() >= kEntriesPerShard) shard.words.clear();
    shard.words.emplace(std::string(word), std::vector<int32_t>(ids.begin(), ids.end()));
  }

 private:
  static constexpr size_t kShards = 64;
  static constexpr size_t kEntriesPerShard = 4096;
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> words;
  };
  Shard& ShardOf(std::string_view word) const { return shards_[StringHash{}(word) % kShards]; }
  mutable Shard shards_[kShards];
};

BpeModel::BpeModel() : cache_(std::make_unique<WordCache>()) {
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  std::fill(std::begin(fallback_ids_), std::end(fallback_ids_), -1);
}
BpeModel::~BpeModel() = default;

Result<std::unique_ptr<const BpeModel>> BpeModel::FromJson(const json& model, bool byte_level) {
  if (!model.is_object()) return InvalidArgument("\"model\" is missing or not an object");
  std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") {
    return Unimplemented("model type \"" + type + "\" is not supported (only BPE)");
  }
  for (const char* unsupported : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(unsupported);
    if (it != model.end() && it->is_string() && !it->get<std::string>().empty()) {
      return Unimplemented(std::string("BPE \"") + unsupported + "\" is not supported");
    }
  }
  if (auto it = model.find("dropout"); it != model.end() && it->is_number() && *it > 0.0) {
    return Unimplemented("BPE dropout is not supported (it makes encoding random)");
  }
  auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) {
    return InvalidArgument("model.vocab is missing or not an object");
  }
  std::unique_ptr<BpeModel> bpe(new BpeModel());
  bpe->byte_level_ = byte_level;
  int64_t max_id = -1;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() >= kMaxTokenId) {
      return InvalidArgument("model.vocab[\"" + it.key() + "\"] is not an id in [0, 2^24)");
    }
    max_id = std::max(max_id, it->get<int64_t>());
  }
  bpe->id_to_token_.resize(max_id + 1);
  std::vector<bool> seen(max_id + 1);
  bpe->token_to_id_.reserve(vocab->size());
  if (byte_level) bpe->bytes_to_id_.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    auto id = static_cast<int32_t>(it->get<int64_t>());
    if (seen[id]) {
      return InvalidArgument("model.vocab gives id " + std::to_string(id) + " to two tokens");
    }
    seen[id] = true;
    const std::string& token = it.key();
    bpe->id_to_token_[id] = token;
    bpe->token_to_id_.emplace(token, id);
    if (!byte_level) continue;
    if (std::optional<std::string> bytes = SymbolsToBytes(token)) {
      if (bytes->size() == 1) bpe->byte_ids_[static_cast<uint8_t>((*bytes)[0])] = id;
      bpe->bytes_to_id_.emplace(std::move(*bytes), id);
    }
  }
  bpe->byte_fallback_ = BoolField(model, "byte_fallback");
  if (bpe->byte_fallback_) {
    for (int b = 0; b < 256; ++b) {
      auto it = bpe->token_to_id_.find(ByteFallbackToken(static_cast<uint8_t>(b)));
      if (it != bpe->token_to_id_.end()) bpe->fallback_ids_[b] = it->second;
    }
  }
  bpe->fuse_unk_ = BoolField(model, "fuse_unk");

  auto merges = model.find("merges");
  if (merges != model.end() && !merges->is_null()) {
    if (!merges->is_array()) return InvalidArgument("model.merges is not an array");
    bpe->merges_.reserve(merges->size());
    int32_t rank = 0;
    for (const json& merge : *merges) {
      std::string left, right;
      if (merge.is_string()) {
        const std::string& text = merge.get_ref<const std::string&>();
        size_t space = text.find(' ');
        if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
          return InvalidArgument("model.merges[" + std::to_string(rank) + "] \"" + text +
                                 "\" is not two tokens separated by one space");
        }
        left = text.substr(0, space);
        right = text.substr(space + 1);
      } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
                 merge[1].is_string()) {
        left = merge[0].get<std::string>();
        right = merge[1].get<std::string>();
      } else {
        return InvalidArgument("model.merges[" + std::to_string(rank) +
                               "] is neither \"a b\" nor [\"a\", \"b\"]");
      }
      auto l = bpe->token_to_id_.find(left);
      auto r = bpe->token_to_id_.find(right);
      auto m = bpe->token_to_id_.find(left + right);
      if (l == bpe->token_to_id_.end() || r == bpe->token_to_id_.end() ||
          m == bpe->token_to_id_.end()) {
        return InvalidArgument("model.merges[" + std::to_string(rank) + "] (\"" + left + "\", \"" +
                               right + "\"): a part or the merged token \"" + left + right +
                               "\" is not in the vocab");
      }
      bpe->merges_.insert_or_assign(PairKey(l->second, r->second), MergeRule{rank, m->second});
      ++rank;
    }
  }
  bpe->ignore_merges_ = BoolField(model, "ignore_merges");
  if (auto unk = model.find("unk_token"); unk != model.end() && unk->is_string()) {
    auto it = bpe->token_to_id_.find(unk->get<std::string>());
    if (it == bpe->token_to_id_.end()) {
      return InvalidArgument("model.unk_token \"" + unk->get<std::string>() +
                             "\" is not in the vocab");
    }
    bpe->unk_id_ = it->second;
  }
  return std::unique_ptr<const BpeModel>(std::move(bpe));
}

std::string_view BpeModel::Token(int32_t id) const {
  if (id < 0 || id >= id_limit()) return {};
  return id_to_token_[id];
}

std::optional<int32_t> BpeModel::TokenId(std::string_view token) const {
  auto it = token_to_id_.find(token);
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::EncodeWord(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  const StringMap& whole = byte_level_ ? bytes_to_id_ : token_to_id_;
  if (ignore_merges_ || word.size() == 1) {
    if (auto it = whole.find(word); it != whole.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable && cache_->Lookup(word, ids)) return;
  thread_local std::vector<int32_t> symbols;
  symbols.clear();
  InitialSymbols(word, symbols);
  size_t first = ids.size();
  ApplyMerges(symbols, ids);
  if (cacheable) cache_->Insert(word, std::span<const int32_t>(ids).subspan(first));
}

// Hugging Face's BPE::merge_word, before merging: each unit (byte or character) is its vocab
// token; else, with byte_fallback, its bytes' <0xNN> tokens when the vocab has them all; else
// unk_token, one per unit or (fuse_unk) one per run of units; else nothing. As there, a byte
// fallback does not end a pending unk, which then follows the fallback bytes.
void BpeModel::InitialSymbols(std::string_view word, std::vector<int32_t>& symbols) const {
  bool pending_unk = false;
  auto end_unk = [&] {
    if (pending_unk) symbols.push_back(unk_id_);
    pending_unk = false;
  };
  for (size_t i = 0; i < word.size();) {
    size_t length = byte_level_ ? 1 : std::max<size_t>(1, Utf8SequenceLength(word, i));
    length = std::min(length, word.size() - i);
    std::string_view unit = word.substr(i, length);
    i += length;
    int32_t id = -1;
    if (byte_level_) {
      id = byte_ids_[static_cast<uint8_t>(unit[0])];
    } else if (auto it = token_to_id_.find(unit); it != token_to_id_.end()) {
      id = it->second;
    }
    if (id >= 0) {
      end_unk();
      symbols.push_back(id);
      continue;
    }
    if (byte_fallback_ && std::all_of(unit.begin(), unit.end(), [&](char c) {
          return fallback_ids_[static_cast<uint8_t>(c)] >= 0;
        })) {
      for (char c : unit) symbols.push_back(fallback_ids_[static_cast<uint8_t>(c)]);
      continue;
    }
    if (unk_id_ < 0) continue;  // dropped, as Hugging Face does without unk_token
    if (!(pending_unk && fuse_unk_)) end_unk();
    pending_unk = true;
  }
  end_unk();
}

void BpeModel::ApplyMerges(const std::vector<int32_t>& initial, std::vector<int32_t>& ids) const {
  // Symbols form a doubly linked list over a vector; a merged-away symbol gets id kDead.
  struct Symbol {
    int32_t id, prev, next;
  };
  struct Candidate {
    int32_t rank, pos, left, right, result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;  // lowest rank, then leftmost
    }
  };
  constexpr int32_t kDead = -2;
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> queue;  // a min-heap by (rank, pos)
  symbols.clear();
  queue.clear();
  const auto n = static_cast<int32_t>(initial.size());
  for (int32_t i = 0; i < n; ++i) symbols.push_back({initial[i], i - 1, i + 1 < n ? i + 1 : -1});
  auto consider = [&](int32_t pos) {
    int32_t next = symbols[pos].next;
    if (next < 0) return;
    auto it = merges_.find(PairKey(symbols[pos].id, symbols[next].id));
    if (it != merges_.end()) {
      queue.push_back({it->second.rank, pos, symbols[pos].id, symbols[next].id, it->second.result});
      std::push_heap(queue.begin(), queue.end(), std::greater<>{});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), std::greater<>{});
    Candidate c = queue.back();
    queue.pop_back();
    Symbol& left = symbols[c.pos];
    if (left.id != c.left || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (right.id != c.right) continue;  // stale: a neighbour changed since this was queued
    left.id = c.result;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.pos;
    right.id = kDead;
    if (left.prev >= 0) consider(left.prev);
    consider(c.pos);
  }
  for (int32_t i = 0; i >= 0 && i < n; i = symbols[i].next) ids.push_back(symbols[i].id);
}

}  // namespace pdserve::tokenizer
