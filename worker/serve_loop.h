// The loop both worker kinds run on their gateway link (docs/architecture.md, "Failure rules"):
// take the gateway's messages, step the engine, send a Load every heartbeat, finish what runs
// on a drain, and after a lost gateway drop its requests, dial it again and serve anew. The
// role's handlers plug in as callbacks. Engine thread only.
#pragma once

#include <atomic>
#include <functional>
#include <utility>

#include "common/status.h"
#include "worker/gateway_link.h"

namespace pdserve::worker {

// What a worker does on each turn of ServeUntilDrainedOrLost. Every callback is required.
struct ServeTurn {
  std::function<void(proto::Envelope&)> handle;  // one message from the gateway
  std::function<bool()> busy;            // work to do now: the turn does not wait for messages
  std::function<void()> work;            // after the turn's messages: an engine step, if any is due
  std::function<bool()> drained;         // nothing left to finish (asked once draining)
  std::function<void()> send_load;       // the Load heartbeat
  std::function<void()> announce_drain;  // logs what the drain still has to finish
};

// A worker's first failed engine step (its device is unusable). Record logs it and sets
// `draining`; the worker's Run() returns Or(what serving returned): the failure, as Internal, so
// that its process exits non-zero for its supervisor to start a fresh one. Engine thread only.
class StepFailure {
 public:
  void Record(const Status& step, std::atomic<bool>& draining);
  Status Or(Status served) const { return failure_.ok() ? std::move(served) : failure_; }

 private:
  Status failure_;
};

// Turns until `draining` is set and the worker has drained (then sends a last Load, flushes what
// is queued and closes: OK), or until the gateway is lost (the loss's status). While idle it waits
// for messages up to the next heartbeat, every `heartbeat_seconds`.
Status ServeUntilDrainedOrLost(GatewayLink& link, double heartbeat_seconds,
                               const std::atomic<bool>& draining, const ServeTurn& turn);

// A worker's life on its link: `serve` until it returns OK (drained or closed) or the gateway is
// lost (the loss's status); after a loss, unless `stopping()`, `abandon` the lost gateway's
// requests, dial the gateway again for up to `reconnect_seconds` (0: none of this) and serve
// again. OK when drained or stopping; otherwise the loss it could not mend. Engine thread only.
Status ServeWithReconnects(GatewayLink& link, double reconnect_seconds,
                           const std::function<Status()>& serve,
                           const std::function<void()>& abandon,
                           const std::function<bool()>& stopping);

// Dials the gateway and sends `hello`, as GatewayLink::Connect, dialling again each second while
// the gateway cannot be reached (not up yet, its name not resolving yet: a pod started before the
// gateway's) for up to `reconnect_seconds` or until `stopping()`. A bad address fails at once.
Result<std::unique_ptr<GatewayLink>> DialFirst(const GatewayLinkOptions& gateway,
                                               const proto::Register& hello,
                                               double reconnect_seconds,
                                               const std::function<bool()>& stopping);

// A worker's whole life with its gateway: dials it and registers with `hello` (DialFirst, into
// `*link`, so that the worker's other threads may send on it), then ServeWithReconnects. OK when
// stopped before the gateway answered.
Status ConnectAndServe(const GatewayLinkOptions& gateway, const proto::Register& hello,
                       double reconnect_seconds, std::unique_ptr<GatewayLink>* link,
                       const std::function<Status()>& serve, const std::function<void()>& abandon,
                       const std::function<bool()>& stopping);

}  // namespace pdserve::worker
