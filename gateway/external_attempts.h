// ExternalAttempts: attempts of one request on external OpenAI-compatible upstreams, over
// ExternalCall (gateway/external_call.h). Start posts the client's body, with the upstream's
// model name and the request's stream flag, to the upstream the spec names; its text, end and
// failure reach the listener; each attempt is closed with the tokens it is paid for: the usage
// the upstream reported, else our tokenizer's count of its text (the prompt counted only when
// it served anything). The upstream's health (router::ExternalUpstreams::Record) and its
// errors' metric are recorded here. One per request; used on that request's strand.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <map>
#include <memory>
#include <string>

#include "gateway/attempt_upstream.h"
#include "gateway/external_call.h"
#include "gateway/gateway_metrics.h"
#include "gateway/openai_request.h"
#include "router/external_upstream.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::gateway {

struct ExternalRequest {
  std::string client_body;  // the request as the client sent it
  std::string model;        // the model it named (an upstream without its own model gets it)
  Endpoint endpoint = Endpoint::kCompletions;
  bool stream = false;
  std::string request_id;  // for logs
  // Its answer goes to the listener as the upstream's choices too (RelaysUpstreamChoices).
  bool relay_choices = false;
};

class ExternalAttempts : public AttemptUpstream,
                         public std::enable_shared_from_this<ExternalAttempts> {
 public:
  ExternalAttempts(std::shared_ptr<router::ExternalUpstreams> upstreams,
                   std::shared_ptr<boost::asio::ssl::context> tls,
                   std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                   std::shared_ptr<GatewayMetrics> metrics, ExternalRequest request)
      : upstreams_(std::move(upstreams)),
        tls_(std::move(tls)),
        tokenizer_(std::move(tokenizer)),
        metrics_(std::move(metrics)),
        request_(std::move(request)) {}

  bool Start(const AttemptSpec& spec, std::shared_ptr<AttemptListener> listener) override;
  void Cancel(uint64_t id) override;

 private:
  struct Running {
    std::shared_ptr<ExternalCall> call;
    std::shared_ptr<AttemptListener> listener;
    boost::asio::any_io_executor strand;
    int upstream = -1;
    int64_t prompt_tokens = 0;  // ours
    std::string text;           // what it sent so far
    bool relayed = false;       // choices of it went to the listener (RelaysUpstreamChoices)
  };
  void HandleEnd(uint64_t id, const ExternalEnd& end);
  // The tokens the attempt is paid for (see the header comment).
  AttemptUse UseOf(uint64_t id, const Running& r, const ExternalEnd& end) const;

  std::shared_ptr<router::ExternalUpstreams> upstreams_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  std::shared_ptr<GatewayMetrics> metrics_;
  ExternalRequest request_;
  std::map<uint64_t, Running> running_;
};

}  // namespace pdserve::gateway
