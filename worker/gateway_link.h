// GatewayLink: a worker's control connection to its gateway (docs/architecture.md, "Wire
// protocols"), shared by the prefill and decode workers (worker/serve_loop.h drives it). Dials the
// gateway, sends Register, checks the reply, and queues every other message for the worker's engine
// thread, which takes them with WaitForMessages. Runs the network on one thread of its own, which
// also keeps the worker alive in the gateway's eyes: when the worker has sent nothing for
// `keepalive` (its engine thread in one long step: a long prompt chunk on a loaded CPU takes
// seconds), it sends the last Load again, so that the gateway's heartbeat timeout does not drop a
// busy worker. The gateway sends a Heartbeat about once a second; a gateway from which nothing
// arrives for `silence_timeout` (frozen, paused, or behind a network that drops packets without a
// reset) is treated as lost, as a closed connection is. When the connection is lost (a gateway
// restarting, a network fault), Reconnect dials again and registers anew on the same link
// object, so that other threads holding it need not know.
//
// Threads: Send, Wake, MarkProgress and LostStatus may be called from any thread; WaitForMessages,
// Reconnect and CloseAfterFlush from the engine thread only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "common/framed_connection.h"
#include "common/status.h"

namespace pdserve::worker {

// When a request's KV must have moved, from a gateway message's deadline_seconds counted from
// now: 30 s when it gives none (0 or less). One that is not a number, infinite or past a day is
// a bad message: an error that says so (cast to a duration it would be undefined behaviour).
Result<std::chrono::steady_clock::time_point> DeadlineFromGateway(double seconds);

struct GatewayLinkOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // the gateway's control port; required
  std::chrono::milliseconds connect_timeout{30000};
  // Well inside the gateway's heartbeat timeout (3 s by default). 0: no keepalive.
  std::chrono::milliseconds keepalive{1000};
  // The gateway is lost when nothing (a Heartbeat or any other message) arrives for this long.
  // Many times its heartbeat interval (1 s), so that a loaded gateway is not taken for a
  // frozen one. 0: never. Time the worker itself was paused (its timer firing late) does not
  // count against the gateway.
  std::chrono::milliseconds silence_timeout{10000};
  // The keepalive repeats the last Load only while the engine thread turns (MarkProgress) at
  // least this often: an engine thread stuck in a step stops the keepalives, and the gateway
  // drops the worker. Longer than any step takes (a long prompt chunk on a loaded CPU). 0: no
  // such check.
  std::chrono::milliseconds stall_timeout{60000};
};

class GatewayLink {
 public:
  // Connects and sends `hello` (its cluster token included). The gateway's answer arrives
  // later: a refusal closes the link with the gateway's reason.
  static Result<std::unique_ptr<GatewayLink>> Connect(const GatewayLinkOptions& options,
                                                      const proto::Register& hello);
  ~GatewayLink();  // stops the network thread; unsent messages are dropped

  // Queues `message`; a Load is also kept, to be sent again by the keepalive. Dropped while the
  // link is lost. Between HoldSends and ReleaseSends, the holding thread's messages wait for
  // FlushSends instead.
  void Send(const proto::Envelope& message);
  // From now on the calling thread's Sends are kept until FlushSends, which writes them in
  // order as one write: a turn's step report, tokens and Load cost the network thread one
  // wake-up instead of one each. Other threads' Sends go out at once and may overtake the kept
  // ones: before handing another thread work whose messages must follow the kept ones, flush.
  // ReleaseSends flushes and ends the holding. Engine thread only.
  void HoldSends();
  void FlushSends();
  void ReleaseSends();
  // Moves the queued messages into `out`, first waiting until one arrives, Wake is called, the
  // link is lost or `until` passes. Returns false once the link is lost (and nothing is queued).
  bool WaitForMessages(std::deque<proto::Envelope>* out,
                       std::chrono::steady_clock::time_point until);
  // Ends a WaitForMessages early (a drain signal, a finished transfer).
  void Wake();
  // The engine thread turned (it is not stuck in a step): the keepalive may go on.
  void MarkProgress();
  // OK while connected; why it was lost otherwise.
  Status LostStatus() const;
  bool registered() const { return registered_; }
  uint64_t worker_id() const { return worker_id_; }
  // Writes what is queued, then closes; waits up to `timeout` for that.
  void CloseAfterFlush(std::chrono::milliseconds timeout);
  // After the link was lost (WaitForMessages returned false): dials the gateway again, in turns
  // of at most a second, until `give_up` passes or `stop()` returns true, then sends the same
  // Register as Connect (its answer arrives as before). The lost connection's unread messages
  // are dropped and its last Load is not repeated: they belonged to the gateway that was lost.
  // OK once the new connection carries the Register; the loss's status when it gave up or was
  // stopped, and at once when the gateway had refused the registration.
  Status Reconnect(std::chrono::steady_clock::time_point give_up,
                   const std::function<bool()>& stop);

 private:
  GatewayLink() = default;
  // Makes `socket` the link's connection and sends the Register on it.
  void Attach(boost::asio::ip::tcp::socket socket);
  void OnMessage(FramedConnection* conn, proto::Envelope&& message);
  void OnClose(const Status& why);
  // The network thread's tick: repeats the last Load (keepalive) and closes a silent gateway.
  void ArmTick();
  std::chrono::milliseconds TickPeriod() const;

  GatewayLinkOptions options_;
  proto::Register hello_;
  boost::asio::io_context io_;
  std::shared_ptr<FramedConnection> conn_;           // guarded by send_mu_; replaced by Reconnect
  boost::asio::steady_timer tick_timer_{io_};        // network thread only
  std::chrono::steady_clock::time_point last_tick_;  // network thread only
  bool stall_logged_ = false;                        // network thread only
  std::atomic<std::chrono::steady_clock::rep> last_progress_{0};  // steady_clock ticks
  std::thread network_;
  // Sends happen under send_mu_, so that a repeated Load never overtakes a newer one.
  std::mutex send_mu_;
  std::optional<proto::Envelope> last_load_;         // guarded by send_mu_
  std::chrono::steady_clock::time_point last_send_;  // guarded by send_mu_
  // When the gateway was last heard from (a message, or the connection made); guarded by send_mu_.
  std::chrono::steady_clock::time_point last_heard_;
  std::atomic<std::thread::id> holder_{};  // the thread whose Sends are held, if any
  std::vector<proto::Envelope> held_;      // holder_'s thread only
  std::atomic<bool> registered_{false};
  std::atomic<bool> refused_{false};  // the gateway refused the Register: not dialled again
  std::atomic<uint64_t> worker_id_{0};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<proto::Envelope> inbox_;  // guarded by mu_
  bool woken_ = false;                 // guarded by mu_
  bool lost_ = false;                  // guarded by mu_
  Status lost_status_;                 // guarded by mu_
};

}  // namespace pdserve::worker
