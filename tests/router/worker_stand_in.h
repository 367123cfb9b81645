// WorkerStandIn: a worker stood in for by one control connection to a WorkerRegistry, for the
// registry's tests: it registers, reports a Load, keeps what the gateway sends it, answers as
// its Answer says, and sends what a test scripts (StepReports, Reserved, TokenBatches).
// Thread-safe: the connection's handler runs on the io_context's thread while the test reads
// what arrived.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "common/framed_connection.h"

namespace pdserve::testing {

class WorkerStandIn {
 public:
  // How it answers a message from the gateway (nothing: nullopt).
  using Answer = std::function<std::optional<proto::Envelope>(const proto::Envelope&)>;

  // Its connection runs on `io` (already running).
  WorkerStandIn(boost::asio::io_context& io, uint16_t port, proto::Register hello, int free_pages,
                Answer answer = {}) {
    auto socket = DialTcp(io, "127.0.0.1", port, std::chrono::seconds(5));
    EXPECT_TRUE(socket.ok()) << socket.status().ToString();
    if (!socket.ok()) return;
    conn_ = FramedConnection::Create(std::move(*socket));
    FramedConnection* raw = conn_.get();
    conn_->Start(
        [inbox = inbox_, answer, raw](proto::Envelope&& m) {
          if (answer) {
            if (auto reply = answer(m)) raw->Send(*reply);
          }
          std::lock_guard lock(inbox->mu);
          inbox->received.push_back(std::move(m));
        },
        [inbox = inbox_](const Status&) { inbox->closed = true; });
    proto::Envelope r;
    *r.mutable_register_() = hello;
    conn_->Send(r);
    proto::Envelope load;
    load.mutable_load()->set_free_pages(free_pages);
    conn_->Send(load);
  }
  ~WorkerStandIn() { Close(); }
  WorkerStandIn(const WorkerStandIn&) = delete;
  WorkerStandIn& operator=(const WorkerStandIn&) = delete;

  // The messages of one kind received so far.
  std::vector<proto::Envelope> Received(proto::Envelope::BodyCase kind) {
    std::lock_guard lock(inbox_->mu);
    std::vector<proto::Envelope> out;
    for (const auto& m : inbox_->received) {
      if (m.body_case() == kind) out.push_back(m);
    }
    return out;
  }
  // Whether the gateway closed the connection.
  bool closed() const { return inbox_->closed; }
  // Sends `m` to the registry, after everything sent before it.
  void Send(const proto::Envelope& m) {
    if (conn_) conn_->Send(m);
  }
  // Ends the connection: the registry sees the worker leave.
  void Close() {
    if (conn_) conn_->Close(Status::Ok());
    conn_.reset();
  }

 private:
  // Shared with the connection's handler, which may run after the stand-in is gone.
  struct Inbox {
    std::mutex mu;
    std::deque<proto::Envelope> received;
    std::atomic<bool> closed{false};
  };
  std::shared_ptr<Inbox> inbox_ = std::make_shared<Inbox>();
  std::shared_ptr<FramedConnection> conn_;
};

}  // namespace pdserve::testing
