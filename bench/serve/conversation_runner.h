// Sends multi-turn conversations (conversation.h) as a closed loop per conversation: turn k+1
// goes to /v1/chat/completions only once turn k's answer has arrived, carrying the system prompt
// and every earlier user turn with the server's real answer, so the server renders the chat
// template and sees the prefix it has seen before. Conversations are the units of
// load_generator.h: they start on the arrival schedule (--request-rate counts conversations per
// second), and max_concurrency caps the conversations in progress (users each with at most one
// request in flight). A failed turn ends its conversation: its later turns are not sent
// (LoadRun::requests_not_sent). Records are in conversation order, turn by turn, carrying their
// conversation and turn, and the ideal cached tokens of prefix_cache_metrics.h. Thread-safety:
// RunConversations blocks the calling thread; calls share nothing.
#pragma once

#include <vector>

#include "bench/serve/conversation.h"
#include "bench/serve/http_client.h"
#include "bench/serve/load_generator.h"
#include "common/status.h"

namespace pdserve::bench {

// `options.endpoint` must be a chat completions path; `body` says what else goes in each body.
Result<LoadRun> RunConversations(const HttpTarget& target, const LoadOptions& options,
                                 const RequestBodyOptions& body,
                                 const std::vector<BenchConversation>& conversations);

}  // namespace pdserve::bench
