// GatewayLink: a worker's control connections to its gateways (docs/architecture.md, "Wire
// protocols"), shared by the prefill and decode workers (worker/serve_loop.h drives it). Dials
// each gateway, sends Register, checks the reply, and queues every other message for the worker's
// engine thread, which takes them with WaitForMessages. Runs the network on one thread of its own,
// which also keeps the worker alive in the gateway's eyes: when the worker has sent nothing for
// `keepalive` (its engine thread in one long step: a long prompt chunk on a loaded CPU takes
// seconds), it sends the last Load again, so that the gateway's heartbeat timeout does not drop a
// busy worker. The gateway sends a Heartbeat about once a second; a gateway from which nothing
// arrives for `silence_timeout` (frozen, paused, or behind a network that drops packets without a
// reset) is treated as lost, as a closed connection is. When the connection is lost (a gateway
// restarting, a network fault), Reconnect dials again and registers anew on the same link
// object, so that other threads holding it need not know.
//
// Several gateways (docs/architecture.md, "Several gateways"): the worker registers with each and
// serves any of them; the above holds for each (its keepalive, silence timeout and refusal). A
// message about a request (TokenBatch, Reserved, RequestError) goes to the gateway that sent the
// request (gateways' request ids do not meet: each starts at a random point); the rest (Load,
// StepReport, KvEvents, KvSnapshot) go to every gateway. When one of several gateways is lost,
// its requests are cancelled at once (a Cancel for each is queued for the engine thread, which
// frees their pages) and it is dialled again every second in the background while the others are
// served. Only when every gateway is lost is the link lost.
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
#include <unordered_map>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "common/framed_connection.h"
#include "common/status.h"

namespace pdserve::worker {

// When a request's KV must have moved, from a gateway message's deadline_seconds counted from
// now: 30 s when it gives none (0 or less). One that is not a number, infinite or past a day is
// a bad message: an error that says so (cast to a duration it would be undefined behaviour).
Result<std::chrono::steady_clock::time_point> DeadlineFromGateway(double seconds);

struct GatewayAddress {
  std::string host;
  uint16_t port = 0;
};

struct GatewayLinkOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;                          // the gateway's control port; required
  std::vector<GatewayAddress> more_gateways;  // registered with too
  // Each name's every address is a gateway of its own (a headless Service's name: one per pod),
  // resolved when the link connects; false: a name is one gateway, at the first address that
  // answers.
  bool every_address = false;
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
  // Registered with at least one gateway; the first such gateway's id for this worker.
  bool registered() const;
  uint64_t worker_id() const;
  // Gateways it is connected to now, of how many.
  size_t connected() const;
  size_t gateways() const { return peers_.size(); }
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
  // One gateway. Guarded by send_mu_.
  struct Peer {
    GatewayAddress address;                  // dialled as is
    std::shared_ptr<FramedConnection> conn;  // the latest connection, closed while down
    bool up = false;                         // connected and its Register sent, not lost since
    bool refused = false;                    // it refused the Register: not dialled again
    bool registered = false;                 // it accepted the Register
    uint64_t worker_id = 0;
    std::optional<proto::Envelope> last_load;
    std::chrono::steady_clock::time_point last_send, last_heard, next_dial;
  };
  // The gateway that sent a request, and how many finishing TokenBatches it still waits for
  // (-1: its first TokenBatch answers it, as a prefill's).
  struct Owner {
    size_t peer;
    int open;
  };

  GatewayLink() = default;
  static std::vector<GatewayAddress> Addresses(const GatewayLinkOptions& options);
  // Makes `socket` gateway `peer`'s connection and sends the Register on it.
  void Attach(size_t peer, boost::asio::ip::tcp::socket socket);
  void OnMessage(size_t peer, FramedConnection* conn, proto::Envelope&& message);
  void OnClose(size_t peer, FramedConnection* conn, const Status& why);
  // Adds `message` to the batch of each gateway it goes to (see the class comment). Under
  // send_mu_; SendBatches sends them, each gateway's in one write.
  void Route(const proto::Envelope& message, std::vector<std::vector<proto::Envelope>>* batches);
  void SendBatches(std::vector<std::vector<proto::Envelope>>& batches);
  // The network thread's tick: repeats each gateway's last Load (keepalive) and closes a silent
  // gateway.
  void ArmTick();
  std::chrono::milliseconds TickPeriod() const;
  // With several gateways: dials those lost while others are served, every second.
  void RunDialer();
  std::string Label(size_t peer) const;

  GatewayLinkOptions options_;
  proto::Register hello_;
  boost::asio::io_context io_;
  boost::asio::steady_timer tick_timer_{io_};                     // network thread only
  std::chrono::steady_clock::time_point last_tick_;               // network thread only
  bool stall_logged_ = false;                                     // network thread only
  std::atomic<std::chrono::steady_clock::rep> last_progress_{0};  // steady_clock ticks
  std::thread network_, dialer_;
  // Lock order: dial_mu_, send_mu_, mu_. The dialer and Reconnect attach under dial_mu_.
  std::mutex dial_mu_;
  // Sends happen under send_mu_, so that a repeated Load never overtakes a newer one.
  mutable std::mutex send_mu_;
  std::vector<Peer> peers_;  // as many as when connected; their state guarded by send_mu_
  std::unordered_map<uint64_t, Owner> owners_;  // by request id; guarded by send_mu_
  std::atomic<std::thread::id> holder_{};       // the thread whose Sends are held, if any
  std::vector<proto::Envelope> held_;           // holder_'s thread only

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<proto::Envelope> inbox_;  // guarded by mu_
  bool woken_ = false;                 // guarded by mu_
  bool lost_ = false;                  // every gateway lost; guarded by mu_
  bool stopping_ = false;              // being destroyed: the dialer ends; guarded by mu_
  Status lost_status_;                 // guarded by mu_
};

}  // namespace pdserve::worker
