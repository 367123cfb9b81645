// FakeGateway: the gateway's control port stood in for on loopback, for tests of the worker's side
// of the control protocol (worker/gateway_link.h, worker/serve_loop.h). Runs its own io thread;
// the methods may be called from any thread.
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/framed_connection.h"
#include "common/status.h"

namespace pdserve::testing {

// Accepts workers one connection at a time, answers each Register (accepting it, or refusing
// it when told to), records the free_pages of every Load and keeps every other message. Drop()
// closes the connection it has, as a gateway that dies would; it accepts the next one. It sends no
// Heartbeat unless told to (SetHeartbeats), as a gateway that went silent.
class FakeGateway {
 public:
  // `port` 0: one chosen by the OS.
  explicit FakeGateway(bool refuse = false, uint16_t port = 0)
      : refuse_(refuse),
        acceptor_(io_,
                  boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), port)),
        port_(acceptor_.local_endpoint().port()),
        heartbeat_timer_(io_) {
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  // Closes its port and its connection, as a gateway that exits does, and returns once both are
  // closed: its thread ends when nothing is left to do (no io_.stop(), which could leave the
  // close unrun and the worker's connection open).
  ~FakeGateway() {
    boost::asio::post(io_, [this] {
      heartbeats_ = false;
      heartbeat_timer_.cancel();
      acceptor_.close();
      if (conn_) conn_->Close(Unavailable("the gateway went away"));
      conn_.reset();
    });
    thread_.join();
  }
  // Sends a Heartbeat every `every` while on, as a live gateway does.
  void SetHeartbeats(bool on, std::chrono::milliseconds every = std::chrono::milliseconds(50)) {
    boost::asio::post(io_, [this, on, every] {
      heartbeats_ = on;
      heartbeat_every_ = every;
      if (on) Beat();
    });
  }
  uint16_t port() const { return port_; }
  std::vector<int> loads() {
    std::lock_guard lock(mu_);
    return loads_;
  }
  // Everything but Register and Load the workers sent, in order.
  std::vector<proto::Envelope> messages() {
    std::lock_guard lock(mu_);
    return messages_;
  }
  int registers() {
    std::lock_guard lock(mu_);
    return registers_;
  }
  void Drop() {
    std::promise<void> done;
    boost::asio::post(io_, [&] {
      if (conn_) conn_->Close(Unavailable("the gateway went away"));
      done.set_value();
    });
    done.get_future().wait();
  }
  // Sends `m` to the worker connected now.
  void Send(const proto::Envelope& m) {
    boost::asio::post(io_, [this, m] {
      if (conn_) conn_->Send(m);
    });
  }

 private:
  void Beat() {
    heartbeat_timer_.expires_after(heartbeat_every_);
    heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || !heartbeats_) return;
      proto::Envelope m;
      m.mutable_heartbeat();
      if (conn_) conn_->Send(m);
      Beat();
    });
  }

  void Accept() {
    acceptor_.async_accept(
        [this](const boost::system::error_code& ec, boost::asio::ip::tcp::socket socket) {
          if (ec) return;
          auto conn = FramedConnection::Create(std::move(socket));
          conn_ = conn;
          // The handler holds a raw pointer: one holding the connection would keep it (and its
          // socket) alive through its own callbacks after the fake let go of it.
          FramedConnection* raw = conn.get();
          conn->Start(
              [this, raw](proto::Envelope&& m) {
                if (m.has_register_()) {
                  {
                    std::lock_guard lock(mu_);
                    ++registers_;
                  }
                  proto::Envelope reply;
                  reply.mutable_register_reply()->set_accepted(!refuse_);
                  reply.mutable_register_reply()->set_worker_id(1);
                  if (refuse_) reply.mutable_register_reply()->set_error("wrong cluster token");
                  raw->Send(reply);
                } else if (m.has_load()) {
                  std::lock_guard lock(mu_);
                  loads_.push_back(m.load().free_pages());
                } else {
                  std::lock_guard lock(mu_);
                  messages_.push_back(m);
                }
              },
              [](const Status&) {});
          Accept();
        });
  }

  const bool refuse_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  const uint16_t port_;
  std::shared_ptr<FramedConnection> conn_;     // io_'s thread only
  boost::asio::steady_timer heartbeat_timer_;  // io_'s thread only
  bool heartbeats_ = false;                    // io_'s thread only
  std::chrono::milliseconds heartbeat_every_{50};
  std::thread thread_;
  std::mutex mu_;
  std::vector<int> loads_;
  std::vector<proto::Envelope> messages_;
  int registers_ = 0;
};

}  // namespace pdserve::testing
