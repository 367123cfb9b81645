#include "bench/serve/conversation_runner.h"

#include <string_view>
#include <unordered_set>

#include <fmt/format.h>

#include "bench/serve/prefix_cache_metrics.h"

namespace pdserve::bench {
namespace {

// Conversation i is unit i; its turn t fills record slot first_record_[i] + t.
class ConversationScript : public LoadScript {
 public:
  ConversationScript(const LoadOptions& options, const RequestBodyOptions& body,
                     nlohmann::json extra, const std::vector<BenchConversation>& conversations)
      : options_(options),
        body_(body),
        extra_(std::move(extra)),
        conversations_(conversations),
        states_(conversations.size()) {
    size_t slot = 0;
    for (const BenchConversation& c : conversations) {
      first_record_.push_back(slot);
      slot += c.turns.size();
    }
    max_requests_ = slot;
  }

  size_t units() const override { return conversations_.size(); }
  size_t max_requests() const override { return max_requests_; }

  std::optional<StreamRequest> Next(size_t unit, RequestRecord* last) override {
    const BenchConversation& c = conversations_[unit];
    State& s = states_[unit];
    if (last != nullptr) {
      size_t turn = s.next_turn - 1;
      last->conversation = static_cast<int64_t>(unit);
      last->turn = static_cast<int64_t>(turn);
      last->ideal_cached_tokens =
          turn == 0 ? IdealSharedPrefixCachedTokens(s.shared_system_tokens, last->prompt_tokens)
                    : IdealLaterTurnCachedTokens(s.previous_prompt_tokens, s.previous_output_tokens,
                                                 last->prompt_tokens);
      if (!last->success) return std::nullopt;  // no answer to carry on with
      s.previous_prompt_tokens = last->prompt_tokens;
      s.previous_output_tokens = last->output_tokens;
      s.context_tokens += c.turns[turn].user_tokens + last->output_tokens;
      s.answers.push_back(last->generated_text);
    } else {
      s.context_tokens = c.system_tokens;
      if (!c.system_prompt.empty()) {
        bool sent_before = !systems_sent_.insert(c.system_prompt).second;
        s.shared_system_tokens = sent_before ? c.system_tokens : 0;
      }
    }
    if (s.next_turn >= c.turns.size()) return std::nullopt;
    size_t turn = s.next_turn++;
    const BenchTurn& t = c.turns[turn];
    s.body = RequestBody(body_, extra_, TurnMessages(c, turn, s.answers), t.output_len);
    return StreamRequest{static_cast<int64_t>(first_record_[unit] + turn), options_.endpoint,
                         &s.body, s.context_tokens + t.user_tokens};
  }

 private:
  struct State {
    size_t next_turn = 0;
    std::vector<std::string> answers;  // the server's, turn by turn
    std::string body;                  // of the request in flight
    int64_t context_tokens = 0;        // system prompt, user turns and answers so far (own count)
    int64_t shared_system_tokens = 0;  // of the first turn: its system prompt was sent before
    int64_t previous_prompt_tokens = 0;
    int64_t previous_output_tokens = 0;
  };

  const LoadOptions& options_;
  const RequestBodyOptions& body_;
  const nlohmann::json extra_;
  const std::vector<BenchConversation>& conversations_;
  std::vector<State> states_;
  std::vector<size_t> first_record_;
  size_t max_requests_ = 0;
  std::unordered_set<std::string_view> systems_sent_;  // views into conversations_
};

}  // namespace

Result<LoadRun> RunConversations(const HttpTarget& target, const LoadOptions& options,
                                 const RequestBodyOptions& body,
                                 const std::vector<BenchConversation>& conversations) {
  if (options.endpoint.find("chat/completions") == std::string::npos) {
    return InvalidArgument(fmt::format(
        "multi-turn conversations need a chat completions endpoint, not '{}'", options.endpoint));
  }
  PDSERVE_ASSIGN_OR_RETURN(nlohmann::json extra, ParseExtraBody(body.extra_body_json));
  ConversationScript script(options, body, std::move(extra), conversations);
  return RunScript(target, options, script);
}

}  // namespace pdserve::bench
