#include "common/framed_connection.h"

#include <spdlog/spdlog.h>

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace pdserve {

namespace asio = boost::asio;
using asio::ip::tcp;

std::shared_ptr<FramedConnection> FramedConnection::Create(tcp::socket socket, size_t max_frame,
                                                           size_t max_queued) {
  return std::shared_ptr<FramedConnection>(
      new FramedConnection(std::move(socket), max_frame, max_queued));
}

FramedConnection::FramedConnection(tcp::socket socket, size_t max_frame, size_t max_queued)
    : socket_(std::move(socket)),
      strand_(asio::make_strand(socket_.get_executor())),
      max_frame_(max_frame),
      max_queued_(max_queued),
      fd_(socket_.native_handle()) {
  boost::system::error_code ec;
  auto endpoint = socket_.remote_endpoint(ec);
  peer_ = ec ? "unknown" : endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
  socket_.set_option(tcp::no_delay(true), ec);
}

void FramedConnection::Start(MessageHandler on_message, CloseHandler on_close) {
  asio::dispatch(strand_, [self = shared_from_this(), on_message = std::move(on_message),
                           on_close = std::move(on_close)]() mutable {
    self->on_message_ = std::move(on_message);
    self->on_close_ = std::move(on_close);
    self->ReadMore();
  });
}

namespace {
constexpr size_t kReadChunk = 64 << 10;  // bytes asked of each read
}  // namespace

void FramedConnection::ReadMore() {
  if (inbox_.size() - inbox_used_ < kReadChunk / 2) inbox_.resize(inbox_used_ + kReadChunk);
  socket_.async_read_some(asio::buffer(inbox_.data() + inbox_used_, inbox_.size() - inbox_used_),
                          asio::bind_executor(strand_, [self = shared_from_this()](
                                                           boost::system::error_code ec, size_t n) {
                            if (self->closed_) return;
                            if (ec) return self->CloseOnReadError(ec);
                            self->inbox_used_ += n;
                            self->DeliverFrames();
                          }));
}

void FramedConnection::DeliverFrames() {
  auto frame_length = [this](size_t at) {
    const auto* h = reinterpret_cast<const uint8_t*>(inbox_.data() + at);
    return (uint32_t{h[0]} << 24) | (uint32_t{h[1]} << 16) | (uint32_t{h[2]} << 8) | uint32_t{h[3]};
  };
  size_t at = 0;
  while (inbox_used_ - at >= 4) {
    const uint32_t length = frame_length(at);
    const size_t limit = max_frame_;
    if (length > limit) {
      return CloseOnStrand(InvalidArgument("frame of " + std::to_string(length) + " bytes from " +
                                           peer_ + " exceeds the limit of " +
                                           std::to_string(limit)));
    }
    if (inbox_used_ - at - 4 < length) break;  // the rest of it is still to come
    proto::Envelope message;
    if (!message.ParseFromArray(inbox_.data() + at + 4, static_cast<int>(length))) {
      return CloseOnStrand(InvalidArgument("unparseable control message from " + peer_));
    }
    at += 4 + length;
    on_message_(std::move(message));
    if (closed_) return;
  }
  if (at > 0) {
    std::memmove(inbox_.data(), inbox_.data() + at, inbox_used_ - at);
    inbox_used_ -= at;
  }
  // Room for the whole of a frame begun; a buffer grown for a large frame is given back after.
  if (inbox_used_ >= 4) {
    const size_t needed = 4 + size_t{frame_length(0)};
    if (inbox_.size() < needed) inbox_.resize(needed);
  } else if (inbox_.size() > 16 * kReadChunk) {
    inbox_.resize(kReadChunk);
    inbox_.shrink_to_fit();
  }
  ReadMore();
}

namespace {

// Appends `message` to `out` as one frame: its length, big-endian, then its bytes.
bool AppendFrame(const proto::Envelope& message, std::string* out) {
  const size_t start = out->size();
  out->append(4, '\0');
  if (!message.AppendToString(out)) {
    out->resize(start);
    return false;
  }
  const uint32_t length = static_cast<uint32_t>(out->size() - start - 4);
  (*out)[start] = static_cast<char>(length >> 24);
  (*out)[start + 1] = static_cast<char>(length >> 16);
  (*out)[start + 2] = static_cast<char>(length >> 8);
  (*out)[start + 3] = static_cast<char>(length);
  return true;
}

}  // namespace

void FramedConnection::Send(const proto::Envelope& message) {
  std::string frame;
  if (AppendFrame(message, &frame)) QueueFrames(std::move(frame));
}

void FramedConnection::SendAll(const std::vector<proto::Envelope>& messages) {
  std::string frames;
  for (const proto::Envelope& m : messages) AppendFrame(m, &frames);
  if (!frames.empty()) QueueFrames(std::move(frames));
}

void FramedConnection::QueueFrames(std::string frames) {
  std::unique_lock lock(write_mu_);
  if (write_closed_) return;
  if (!writing_active_) {
    // Nothing queued or being written: write from this thread, without waking the strand's.
    const ssize_t n = ::send(fd_, frames.data(), frames.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(frames.size())) return;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      const int error = errno;
      lock.unlock();
      return Close(Unavailable("write to " + peer_ + " failed: " + std::strerror(error)));
    }
    if (n > 0) frames.erase(0, static_cast<size_t>(n));
  }
  queued_bytes_ += frames.size();
  if (queued_bytes_ > max_queued_) {
    const size_t queued = queued_bytes_;
    lock.unlock();
    return Close(ResourceExhausted("peer " + peer_ + " is not reading: " + std::to_string(queued) +
                                   " bytes queued"));
  }
  queue_.push_back(std::move(frames));
  if (writing_active_) return;  // the write in flight takes it next
  writing_active_ = true;
  lock.unlock();
  asio::dispatch(strand_, [self = shared_from_this()] { self->WriteNext(); });
}

void FramedConnection::WriteNext() {
  {
    // Every frame queued so far goes in one gathered write. Frames queued meanwhile are added
    // behind them; a deque's elements stay where they are.
    std::lock_guard lock(write_mu_);
    if (write_closed_) return;
    in_flight_ = queue_.size();
    writing_.clear();
    for (const std::string& frame : queue_) writing_.push_back(asio::buffer(frame));
  }
  asio::async_write(socket_, writing_,
                    asio::bind_executor(
                        strand_, [self = shared_from_this()](boost::system::error_code ec, size_t) {
                          if (self->closed_) return;
                          if (ec) {
                            return self->CloseOnStrand(Unavailable("write to " + self->peer_ +
                                                                   " failed: " + ec.message()));
                          }
                          bool more = false;
                          {
                            std::lock_guard lock(self->write_mu_);
                            for (; self->in_flight_ > 0; --self->in_flight_) {
                              self->queued_bytes_ -= self->queue_.front().size();
                              self->queue_.pop_front();
                            }
                            more = !self->queue_.empty();
                            self->writing_active_ = more;
                          }
                          if (!more) {
                            if (self->close_after_flush_)
                              self->CloseOnStrand(self->flush_close_status_);
                            return;
                          }
                          self->WriteNext();
                        }));
}

void FramedConnection::Close(const Status& why) {
  asio::dispatch(strand_, [self = shared_from_this(), why] { self->CloseOnStrand(why); });
}

void FramedConnection::CloseOnReadError(const boost::system::error_code& ec) {
  CloseOnStrand(Unavailable("connection to " + peer_ + " closed: " + ec.message()));
}

void FramedConnection::CloseAfterFlush(const Status& why) {
  asio::dispatch(strand_, [self = shared_from_this(), why] {
    {
      std::lock_guard lock(self->write_mu_);
      if (self->writing_active_) {
        self->close_after_flush_ = true;
        self->flush_close_status_ = why;
        return;
      }
    }
    self->CloseOnStrand(why);
  });
}

void FramedConnection::CloseOnStrand(const Status& why) {
  if (closed_) return;
  closed_ = true;
  {
    // Under the lock: a thread writing directly never writes to a closed (or reused) descriptor.
    std::lock_guard lock(write_mu_);
    write_closed_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    queue_.clear();
    queued_bytes_ = 0;
  }
  if (on_close_) {
    auto handler = std::move(on_close_);
    on_close_ = nullptr;
    on_message_ = nullptr;
    handler(why);
  }
}

namespace {

// One connect to `endpoint` that gives up at `deadline`: a host that drops SYNs would hold a
// blocking connect for minutes. A socket connected to itself (dialling a free port of the
// ephemeral range, as when a gateway is restarting: TCP's simultaneous open) is refused.
boost::system::error_code ConnectBefore(tcp::socket& socket, const tcp::endpoint& endpoint,
                                        std::chrono::steady_clock::time_point deadline) {
  boost::system::error_code ec;
  socket.open(endpoint.protocol(), ec);
  if (ec) return ec;
  socket.non_blocking(true, ec);
  if (ec) return ec;
  if (::connect(socket.native_handle(), endpoint.data(), static_cast<socklen_t>(endpoint.size())) !=
      0) {
    if (errno != EINPROGRESS) return {errno, boost::system::system_category()};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{socket.native_handle(), POLLOUT, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count())));
    if (ready == 0) return asio::error::timed_out;
    if (ready < 0) return {errno, boost::system::system_category()};
    int error = 0;
    socklen_t length = sizeof error;
    ::getsockopt(socket.native_handle(), SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) return {error, boost::system::system_category()};
  }
  if (socket.local_endpoint(ec) == socket.remote_endpoint(ec))
    return asio::error::connection_refused;
  socket.non_blocking(false, ec);  // as a socket connected by Asio's blocking connect is
  return ec;
}

}  // namespace

Result<tcp::socket> DialTcp(asio::io_context& io, const std::string& host, uint16_t port,
                            std::chrono::milliseconds timeout) {
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (ec) return Unavailable("cannot resolve " + host + ": " + ec.message());
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    for (const auto& entry : endpoints) {
      tcp::socket socket(io);
      ec = ConnectBefore(socket, entry.endpoint(), deadline);
      if (!ec) return socket;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return Unavailable("cannot connect to " + host + ":" + std::to_string(port) + ": " +
                         ec.message());
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(100), deadline - now));
  }
}

}  // namespace pdserve
