#include "worker/serve_loop.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <thread>

namespace pdserve::worker {

void StepFailure::Record(const Status& step, std::atomic<bool>& draining) {
  if (failure_.ok()) {
    failure_ = Internal("an engine step failed: " + step.message());
    spdlog::error("{}; draining, then exiting for a fresh start", failure_.message());
  }
  draining = true;
}

Status ServeUntilDrainedOrLost(GatewayLink& link, double heartbeat_seconds,
                               const std::atomic<bool>& draining, const ServeTurn& turn) {
  using Clock = std::chrono::steady_clock;
  const auto heartbeat =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(heartbeat_seconds));
  auto next_heartbeat = Clock::now();
  bool announced_drain = false;
  std::deque<proto::Envelope> inbox;
  // A turn's messages go out together: the answers to the gateway's messages before the step
  // (a Reserved reply must not wait for it), the step's report, tokens and Load after.
  struct HeldSends {
    explicit HeldSends(GatewayLink& l) : link(l) { link.HoldSends(); }
    ~HeldSends() { link.ReleaseSends(); }
    GatewayLink& link;
  };
  {
    HeldSends held(link);
    while (true) {
      link.MarkProgress();
      const auto until =
          turn.busy() ? Clock::now() : std::min(next_heartbeat, Clock::now() + heartbeat);
      inbox.clear();
      if (!link.WaitForMessages(&inbox, until)) break;
      for (auto& m : inbox) turn.handle(m);
      link.FlushSends();
      turn.work();
      if (draining && !announced_drain) {
        announced_drain = true;
        turn.send_load();
        turn.announce_drain();
      }
      if (draining && turn.drained()) break;
      if (Clock::now() >= next_heartbeat) {
        turn.send_load();
        next_heartbeat = Clock::now() + heartbeat;
      }
      link.FlushSends();
    }
  }
  Status lost = link.LostStatus();
  if (lost.ok()) {
    turn.send_load();
    link.CloseAfterFlush(std::chrono::seconds(10));  // the last tokens reach the gateway
  }
  return lost;
}

Status ServeWithReconnects(GatewayLink& link, double reconnect_seconds,
                           const std::function<Status()>& serve,
                           const std::function<void()>& abandon,
                           const std::function<bool()>& stopping) {
  using Clock = std::chrono::steady_clock;
  const auto window = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::max(0.0, reconnect_seconds)));
  while (true) {
    Status lost = serve();
    if (lost.ok() || stopping()) return Status::Ok();
    if (window.count() == 0) return lost;  // the process ends, and its requests with it
    abandon();
    spdlog::warn("lost the gateway ({}); dialling it again for up to {} s", lost.ToString(),
                 reconnect_seconds);
    Status again = link.Reconnect(Clock::now() + window, stopping);
    if (stopping()) return Status::Ok();
    if (!again.ok()) return again;
  }
}

Result<std::unique_ptr<GatewayLink>> DialFirst(const GatewayLinkOptions& gateway,
                                               const proto::Register& hello,
                                               double reconnect_seconds,
                                               const std::function<bool()>& stopping) {
  using Clock = std::chrono::steady_clock;
  const auto give_up =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(std::max(0.0, reconnect_seconds)));
  bool told = false;
  while (true) {
    GatewayLinkOptions turn = gateway;  // a dial that hangs ends with the window
    turn.connect_timeout = std::min(
        gateway.connect_timeout,
        std::max(std::chrono::milliseconds(1000),
                 std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now())));
    auto link = GatewayLink::Connect(turn, hello);
    if (link.ok()) return link;
    const bool retry = link.status().code() == StatusCode::kUnavailable ||
                       link.status().code() == StatusCode::kDeadlineExceeded;
    if (!retry || stopping() || Clock::now() >= give_up) return link.status();
    if (!told) {
      told = true;
      spdlog::warn("cannot reach the gateway {}:{} yet ({}); dialling it for up to {} s",
                   gateway.host, gateway.port, link.status().ToString(), reconnect_seconds);
    }
    std::this_thread::sleep_until(std::min(Clock::now() + std::chrono::seconds(1), give_up));
  }
}

Status ConnectAndServe(const GatewayLinkOptions& gateway, const proto::Register& hello,
                       double reconnect_seconds, std::unique_ptr<GatewayLink>* link,
                       const std::function<Status()>& serve, const std::function<void()>& abandon,
                       const std::function<bool()>& stopping) {
  auto first = DialFirst(gateway, hello, reconnect_seconds, stopping);
  if (!first.ok()) return stopping() ? Status::Ok() : first.status();
  *link = std::move(*first);
  return ServeWithReconnects(**link, reconnect_seconds, serve, abandon, stopping);
}

}  // namespace pdserve::worker
