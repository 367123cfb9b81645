// FramedConnection: control messages (proto::Envelope) over one TCP socket, each frame a 4-byte
// big-endian length and the serialized message (docs/architecture.md, "Wire protocols"). Used by
// the gateway for each worker and by each worker for its gateway.
//
// Threads: reads run on the connection's strand, and so do writes that must wait (a full socket
// buffer); Send writes at once from its caller's thread when nothing waits before it. Send and
// Close may be called from any thread. Handlers are called on the strand, never concurrently. The
// close handler runs exactly once, after which no message handler runs. A frame over
// max_frame_bytes, bytes that do not parse, or a peer that lets max_queued_bytes pile up unread
// closes the connection with a Status that says so; nothing a peer sends can crash the process.
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <atomic>
#include <boost/asio.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/control.pb.h"

namespace pdserve {

class FramedConnection : public std::enable_shared_from_this<FramedConnection> {
 public:
  using MessageHandler = std::function<void(proto::Envelope&&)>;
  using CloseHandler = std::function<void(const Status&)>;

  static std::shared_ptr<FramedConnection> Create(boost::asio::ip::tcp::socket socket,
                                                  size_t max_frame_bytes = 64 << 20,
                                                  size_t max_queued_bytes = 256 << 20);

  // Starts reading. Call once.
  void Start(MessageHandler on_message, CloseHandler on_close);
  // Queues one message; dropped if the connection is closed.
  void Send(const proto::Envelope& message);
  // Queues `messages` in order, as one write: one hand-off to the strand for all of them.
  void SendAll(const std::vector<proto::Envelope>& messages);
  void Close(const Status& why);
  // Closes once every queued message has been written (a worker's last tokens on drain).
  void CloseAfterFlush(const Status& why);
  const std::string& peer() const { return peer_; }
  // The limit for frames read from now on (a gateway raises it once a worker registered).
  // Any thread; takes effect at the next frame header.
  void set_max_frame_bytes(size_t bytes) { max_frame_ = bytes; }

 private:
  FramedConnection(boost::asio::ip::tcp::socket socket, size_t max_frame, size_t max_queued);
  // Queues framed bytes (one frame or several) on the strand.
  void QueueFrames(std::string frames);
  void ReadMore();
  void DeliverFrames();
  void WriteNext();
  void CloseOnStrand(const Status& why);
  void CloseOnReadError(const boost::system::error_code& ec);

  boost::asio::ip::tcp::socket socket_;
  boost::asio::strand<boost::asio::any_io_executor> strand_;
  std::atomic<size_t> max_frame_;
  const size_t max_queued_;
  std::string peer_;
  MessageHandler on_message_;
  CloseHandler on_close_;
  // Bytes read and not yet delivered: whole frames are handed on as each read brings them, so a
  // burst of frames costs one read, not two a frame.
  std::vector<char> inbox_;
  size_t inbox_used_ = 0;
  // The write side. Send writes from the calling thread when nothing is queued or being
  // written (most messages: no hand-off to the strand's thread); otherwise it queues, and the
  // strand writes the queue in gathered writes. Guarded by write_mu_, which is also held while
  // the socket closes.
  const int fd_;
  std::mutex write_mu_;
  bool write_closed_ = false;
  bool writing_active_ = false;    // a write is queued on the strand or in flight
  std::deque<std::string> queue_;  // framed bytes waiting to be written; the first in_flight_
  size_t in_flight_ = 0;           // of them are being written, in one gathered write
  std::vector<boost::asio::const_buffer> writing_;  // the strand's only
  size_t queued_bytes_ = 0;
  bool closed_ = false;             // the strand's
  bool close_after_flush_ = false;  // the strand's
  Status flush_close_status_;
};

// Connects to host:port, retrying until `timeout` passes. Blocking: for start-up paths (a worker
// dialling its gateway), before `io` runs.
Result<boost::asio::ip::tcp::socket> DialTcp(boost::asio::io_context& io, const std::string& host,
                                             uint16_t port, std::chrono::milliseconds timeout);

}  // namespace pdserve
