#include "gateway/worker_attempts.h"

#include <boost/asio/post.hpp>

namespace pdserve::gateway {

namespace {
// The registry's sink for one attempt: posts what it hears to the listener's strand.
class AttemptSink : public router::RequestSink {
 public:
  AttemptSink(uint64_t id, boost::asio::any_io_executor strand,
              std::shared_ptr<AttemptListener> listener)
      : id_(id), strand_(std::move(strand)), listener_(std::move(listener)) {}

  void OnTokens(const proto::TokenBatch& batch) override {
    boost::asio::post(strand_,
                      [l = listener_, id = id_, batch, read_at = std::chrono::steady_clock::now()] {
                        l->AttemptTokens(id, batch, read_at);
                      });
  }
  void OnFailure(const router::AttemptFailure& failure) override {
    AttemptFault fault;
    fault.message = failure.message;
    fault.retryable = failure.retryable;
    fault.no_room = failure.no_room;
    fault.preempted = failure.preempted;
    fault.failed_worker = failure.failed_worker;
    boost::asio::post(strand_, [l = listener_, id = id_, fault] { l->AttemptFailed(id, fault); });
  }
  void OnAttemptClosed(const router::AttemptUsage& usage) override {
    AttemptUse use;
    use.workers = usage;
    boost::asio::post(strand_, [l = listener_, use] { l->AttemptClosed(use); });
  }

 private:
  const uint64_t id_;
  boost::asio::any_io_executor strand_;
  std::shared_ptr<AttemptListener> listener_;
};
}  // namespace

bool WorkerAttempts::Start(const AttemptSpec& spec, std::shared_ptr<AttemptListener> listener) {
  auto sink = std::make_shared<AttemptSink>(spec.id, spec.strand, std::move(listener));
  auto attempt = registry_->Dispatch(spec.id, *spec.prompt, spec.sampling, sink,
                                     spec.exclude_workers, spec.zones);
  // Workers that failed this request are avoided while others can take it, not waited for.
  if (!attempt.ok() && !spec.exclude_workers.empty()) {
    attempt = registry_->Dispatch(spec.id, *spec.prompt, spec.sampling, sink, {}, spec.zones);
  }
  return attempt.ok();
}

}  // namespace pdserve::gateway
