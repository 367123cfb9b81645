#include "bench/serve/conversation.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

namespace pdserve::bench {
namespace {

using nlohmann::json;

bool IsUserRole(std::string_view role) { return role == "human" || role == "user"; }

bool IsReplyRole(std::string_view role) {
  return role == "gpt" || role == "assistant" || role == "chatgpt" || role == "bard" ||
         role == "model";
}

// An entry's role and text, or nullopt when it lacks either.
std::optional<std::pair<std::string_view, std::string_view>> Entry(const json& entry) {
  if (!entry.is_object()) return std::nullopt;
  auto from = entry.find("from");
  auto value = entry.find("value");
  if (from == entry.end() || value == entry.end() || !from->is_string() || !value->is_string()) {
    return std::nullopt;
  }
  return std::pair<std::string_view, std::string_view>(from->get_ref<const std::string&>(),
                                                       value->get_ref<const std::string&>());
}

BenchConversation ReadConversation(const json& entries, const ShareGptTurnsOptions& options,
                                   const TokenCounter& counter) {
  BenchConversation conversation;
  size_t i = 0;
  if (!entries.empty()) {
    auto first = Entry(entries[0]);
    if (first && first->first == "system") {
      conversation.system_prompt = std::string(first->second);
      conversation.system_tokens = CountTokens(counter, conversation.system_prompt);
      i = 1;
    }
  }
  while (i + 1 < entries.size() &&
         static_cast<int64_t>(conversation.turns.size()) < options.max_turns) {
    auto user = Entry(entries[i]);
    auto reply = Entry(entries[i + 1]);
    if (!user || !reply || !IsUserRole(user->first) || !IsReplyRole(reply->first) ||
        user->second.empty()) {
      break;
    }
    BenchTurn turn;
    turn.user = std::string(user->second);
    turn.user_tokens = CountTokens(counter, turn.user);
    turn.output_len = options.fixed_output_len
                          ? *options.fixed_output_len
                          : std::max<int64_t>(1, CountTokens(counter, reply->second));
    conversation.turns.push_back(std::move(turn));
    i += 2;
  }
  return conversation;
}

}  // namespace

Result<std::vector<BenchConversation>> SampleMultiTurnConversations(const MultiTurnOptions& options,
                                                                    const TokenCounter& counter) {
  if (options.num_conversations < 1) return InvalidArgument("--num-conversations must be >= 1");
  if (options.turns < 1) return InvalidArgument("--turns must be >= 1");
  if (options.system_prompt_len < 0) return InvalidArgument("--system-prompt-len is negative");
  if (options.user_turn_len < 1 || options.output_len < 1) {
    return InvalidArgument("--user-turn-len and --output-len must be >= 1");
  }
  std::mt19937_64 rng(options.seed);
  WordText system;
  if (options.system_prompt_len > 0) {
    system = RandomWordText(options.system_prompt_len, rng, counter);
  }
  std::vector<BenchConversation> conversations(static_cast<size_t>(options.num_conversations));
  for (BenchConversation& c : conversations) {
    c.system_prompt = system.text;
    c.system_tokens = system.tokens;
    for (int64_t t = 0; t < options.turns; ++t) {
      WordText user = RandomWordText(options.user_turn_len, rng, counter);
      c.turns.push_back({std::move(user.text), user.tokens, options.output_len});
    }
  }
  return conversations;
}

Result<std::vector<BenchConversation>> LoadShareGptConversations(
    const std::string& path, const ShareGptTurnsOptions& options, const TokenCounter& counter) {
  if (options.max_turns < 1) return InvalidArgument("--turns must be >= 1");
  if (options.fixed_output_len && *options.fixed_output_len < 1) {
    return InvalidArgument("--output-len must be >= 1");
  }
  PDSERVE_ASSIGN_OR_RETURN(std::string text, ReadDatasetFile(path));
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  text = std::string();
  if (doc.is_discarded() || !doc.is_array()) {
    return InvalidArgument(fmt::format("'{}' is not a ShareGPT JSON array", path));
  }
  std::vector<const json*> entries;
  for (const json& item : doc) {
    if (!item.is_object()) continue;
    auto conv = item.find("conversations");
    if (conv != item.end() && conv->is_array()) entries.push_back(&*conv);
  }
  std::mt19937_64 rng(options.seed);
  std::shuffle(entries.begin(), entries.end(), rng);
  std::vector<BenchConversation> conversations;
  int64_t requests = 0;
  for (const json* entry : entries) {
    bool enough = options.num_conversations > 0
                      ? static_cast<int64_t>(conversations.size()) >= options.num_conversations
                      : requests >= options.min_requests;
    if (enough) break;
    BenchConversation conversation = ReadConversation(*entry, options, counter);
    if (conversation.turns.empty()) continue;
    requests += static_cast<int64_t>(conversation.turns.size());
    conversations.push_back(std::move(conversation));
  }
  if (conversations.empty()) {
    return InvalidArgument(
        fmt::format("'{}' has no conversation with a user turn and a reply", path));
  }
  if (options.num_conversations > 0 &&
      static_cast<int64_t>(conversations.size()) < options.num_conversations) {
    return InvalidArgument(fmt::format("'{}' has only {} usable conversations, {} asked for", path,
                                       conversations.size(), options.num_conversations));
  }
  return conversations;
}

json TurnMessages(const BenchConversation& conversation, size_t turn,
                  const std::vector<std::string>& answers) {
  json messages = json::array();
  if (!conversation.system_prompt.empty()) {
    messages.push_back({{"role", "system"}, {"content", conversation.system_prompt}});
  }
  for (size_t t = 0; t < turn && t < answers.size(); ++t) {
    messages.push_back({{"role", "user"}, {"content", conversation.turns[t].user}});
    messages.push_back({{"role", "assistant"}, {"content", answers[t]}});
  }
  messages.push_back({{"role", "user"}, {"content", conversation.turns[turn].user}});
  return messages;
}

int64_t CountTurns(const std::vector<BenchConversation>& conversations) {
  int64_t turns = 0;
  for (const BenchConversation& c : conversations) turns += static_cast<int64_t>(c.turns.size());
  return turns;
}

}  // namespace pdserve::bench
