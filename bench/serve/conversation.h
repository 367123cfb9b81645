// Multi-turn conversations for a serving benchmark, the traffic a prefix cache is for: a system
// prompt, then user turns each answered by the server before the next is sent
// (conversation_runner.h sends them). Two sources: synthetic conversations (`--dataset
// multi-turn`: one system prompt of random words shared word for word by every conversation, so
// a prefix cache can hit across conversations, and random user turns, all from the seed), and
// every human turn of ShareGPT conversations, in order (`--sharegpt-turns all`). The answers are
// always the server's own, so what a turn sends is what the server saw and said before. Pure
// functions over files and values: thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/serve/dataset.h"
#include "common/status.h"

namespace pdserve::bench {

struct BenchTurn {
  std::string user;         // the user message
  int64_t user_tokens = 0;  // by the TokenCounter in use
  int64_t output_len = 0;   // sent as max_completion_tokens
};

struct BenchConversation {
  std::string system_prompt;  // "" = no system message
  int64_t system_tokens = 0;  // by the TokenCounter in use
  std::vector<BenchTurn> turns;
};

struct MultiTurnOptions {
  int64_t num_conversations = 16;    // >= 1
  int64_t turns = 6;                 // per conversation, >= 1
  int64_t system_prompt_len = 1024;  // tokens (words without a counter); 0 = no system prompt
  int64_t user_turn_len = 128;       // tokens (words without a counter) per user turn, >= 1
  int64_t output_len = 128;          // max_completion_tokens per answer, >= 1
  uint64_t seed = 0;                 // same seed, same words (with the same standard library)
};

// Synthetic conversations; lengths are fitted by `counter` as RandomWordText does.
Result<std::vector<BenchConversation>> SampleMultiTurnConversations(
    const MultiTurnOptions& options, const TokenCounter& counter = nullptr);

struct ShareGptTurnsOptions {
  // Conversations to take: exactly this many when > 0, else as many as it takes to reach
  // min_requests turns in all.
  int64_t num_conversations = 0;
  int64_t min_requests = 1000;
  int64_t max_turns = 6;  // turns replayed per conversation at most, >= 1
  // max_completion_tokens of every turn; unset: the recorded answer's length in tokens.
  std::optional<int64_t> fixed_output_len;
  uint64_t seed = 0;  // of the shuffle, as LoadShareGptPrompts
};

// ShareGPT JSON, every conversation shuffled by seed: a leading "system" entry becomes the system
// prompt; then each human ("human"/"user") entry followed by a reply ("gpt"/"assistant"/...)
// is a turn whose output_len is the reply's length (or fixed_output_len). The recorded replies are
// not sent: each turn carries the server's own earlier answers. A conversation ends at its first
// entry out of that order; one with no turn is skipped.
Result<std::vector<BenchConversation>> LoadShareGptConversations(
    const std::string& path, const ShareGptTurnsOptions& options, const TokenCounter& counter);

// The chat messages of turn `turn` (0-based): the system prompt, then user and assistant
// alternating with `answers` (the server's answers to turns 0..turn-1), then the turn's user
// message. Needs answers.size() >= turn.
nlohmann::json TurnMessages(const BenchConversation& conversation, size_t turn,
                            const std::vector<std::string>& answers);

// Turns in all.
int64_t CountTurns(const std::vector<BenchConversation>& conversations);

}  // namespace pdserve::bench
