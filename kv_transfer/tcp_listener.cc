// TcpKvListener: the receiving side of the TCP side channel. One I/O thread accepts and reads;
// payloads land straight in the reserved pages and their CRC is checked as they land, before the
// ack is queued (ChunkChecksum): on the I/O thread while each piece is in cache, or, with
// offload_tcp_checksums and a second CPU, span by span on the worker pool. GPU receives run on
// the worker pool, in order per connection.

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <deque>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "kv_transfer/checksum_offload.h"
#include "kv_transfer/chunk_checksum.h"
#include "kv_transfer/device_payload.h"
#include "kv_transfer/large_transfers.h"
#include "kv_transfer/tcp_congestion.h"
#include "kv_transfer/tcp_transport.h"

#include "common/accept_backoff.h"

namespace pdserve::kv_transfer {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr size_t kDrainBuffer = 1 << 20;
// Largest socket read of a chunk payload; each piece is CRC'd while it is still in cache (unless
// the worker pool checks the CRCs). A quarter of L2: the size follows the loopback sweeps in
// docs/benchmarks.md (TCP transport and listener), in bandwidth and in the receiver's CPU.
constexpr size_t kPayloadPiece = 256 << 10;
// Frames read inline (ReadNow) before one goes through the reactor, which unwinds the stack.
constexpr int kMaxInlineFrames = 16;
// How long an ack of a chunk read inline may wait for the acks of the chunks behind it; it goes
// out with the next ack queued after that, or when the session waits for input.
constexpr auto kMaxAckDelay = std::chrono::microseconds(200);
// A GPU receive that is not bounded by a request deadline (a refused chunk) gets this long.
constexpr auto kDiscardTimeout = std::chrono::seconds(30);
// How long a Failed request's pages stay out of the pool once a CUDA IPC sender is connected
// (KvReceiver::HoldFailedPages; past the deadline for a request no chunk reached): a sender
// that is told stops within a round trip and a layer's copies, milliseconds; this leaves a wide
// margin at the cost of a few seconds of those pages.
constexpr auto kFailedPageHold = std::chrono::seconds(2);

}  // namespace

class TcpKvListener::Impl {
 public:
  Impl(KvReceiver& receiver, TcpKvListenerOptions options)
      : receiver_(receiver),
        options_(std::move(options)),
        workers_(std::max(1, options_.verify_threads)),
        acceptor_(io_),
        accept_backoff_(io_.get_executor(), "the KV listener") {}

  ~Impl() {
    asio::post(io_, [this] {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
    });
    io_.stop();
    if (thread_.joinable()) thread_.join();
    workers_.join();
  }

  Status Start() {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(options_.bind_address, ec);
    if (ec) return InvalidArgument("KV listener: bad bind address " + options_.bind_address);
    const tcp::endpoint endpoint(address, options_.port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Unavailable(fmt::format("KV listener: cannot listen on {}:{}: {}",
                                     options_.bind_address, options_.port, ec.message()));
    }
    PDSERVE_RETURN_IF_ERROR(
        SetCongestionControl(acceptor_.native_handle(), options_.congestion_control)
            .WithContext("KV listener"));
    port_ = acceptor_.local_endpoint().port();
    if (options_.offload_tcp_checksums && !options_.pools_on_device) {
      const int cpus = AllowedCpus();
      if (cpus >= 2) {
        checksum_pool_ = &workers_;
        spdlog::info("KV listener: payload CRCs are checked on {} worker threads ({} CPUs)",
                     std::max(1, options_.verify_threads), cpus);
      } else {
        spdlog::info("KV listener: payload CRCs are checked on the I/O thread: one CPU only");
      }
    }
    Accept();
    thread_ = std::thread([this] { io_.run(); });
    return Status::Ok();
  }

  uint16_t port() const { return port_; }
  int connections() const { return connections_.load(); }

  class Session;

 private:
  void Accept();

  KvReceiver& receiver_;
  const TcpKvListenerOptions options_;
  asio::thread_pool* checksum_pool_ = nullptr;  // &workers_ when TCP CRCs go there
  std::atomic<int> connections_{0};  // before io_: sessions destroyed with io_ count down
  asio::thread_pool workers_;        // before io_: sessions (destroyed with io_) hold strands on it
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(io_);
  tcp::acceptor acceptor_;
  AcceptBackoff accept_backoff_;  // io_'s thread
  uint16_t port_ = 0;
  std::thread thread_;
};

class TcpKvListener::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Impl& listener, tcp::socket socket)
      : listener_(listener),
        receiver_(listener.receiver_),
        socket_(std::move(socket)),
        ordered_(asio::make_strand(listener.workers_)),
        hello_timer_(listener.io_) {
    ++listener_.connections_;
  }

  ~Session() {
    if (peer_ != 0) receiver_.RemovePeer(peer_, Unavailable("KV peer lost: connection closed"));
    --listener_.connections_;
  }

  void Start() {
    boost::system::error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    // Checked when the listener started; accepted sockets may not inherit it on every kernel.
    (void)SetCongestionControl(socket_.native_handle(), listener_.options_.congestion_control);
    // Reads first take what the socket holds without a round through the reactor (ReadNow).
    socket_.non_blocking(true, ignored);
    std::weak_ptr<Session> weak = shared_from_this();
    auto& io = listener_.io_;
    peer_ = receiver_.AddPeer({[weak, &io](uint64_t id, const Status& why) {
                                 asio::post(io, [weak, id, why] {
                                   if (auto self = weak.lock())
                                     self->SendControl(FrameType::kCancel, id, 0, 0, 0, why);
                                 });
                               },
                               [weak, &io] {
                                 asio::post(io, [weak] {
                                   if (auto self = weak.lock())
                                     self->Close(DeadlineExceeded("KV chunk write stalled"));
                                 });
                               }});
    hello_timer_.expires_after(listener_.options_.handshake_timeout);
    hello_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec && !self->hello_done_) self->Close(DeadlineExceeded("KV peer sent no hello"));
    });
    ReadHeader();
  }

 private:
  static Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, m}; }

  // Reads what the socket holds now into `buffer`, without waiting: the bytes read (0 when none
  // are there yet), or an error. System calls are dear on virtual machines; a chunk's frames
  // usually arrive together and are taken in one pass.
  Result<size_t> ReadNow(asio::mutable_buffer buffer) {
    boost::system::error_code ec;
    const size_t n = socket_.read_some(buffer, ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) return size_t{0};
    if (ec) return Unavailable("KV peer lost: " + ec.message());
    return n;
  }

  void ReadHeader() {
    size_t got = 0;
    if (inline_frames_ < kMaxInlineFrames) {  // bounded: each inline frame deepens the stack
      auto n = ReadNow(asio::buffer(header_));
      if (!n.ok()) return Close(n.status());
      got = *n;
      if (got == header_.size()) {
        ++inline_frames_;
        return OnHeader();
      }
    }
    FlushDeferred();
    asio::async_read(socket_, asio::buffer(header_.data() + got, header_.size() - got),
                     [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                       if (ec) return self->Close(Unavailable("KV peer lost: " + ec.message()));
                       self->inline_frames_ = 0;
                       self->OnHeader();
                     });
  }

  void OnHeader() {
    auto parsed = ParseHeader(header_);
    if (!parsed.ok()) return Close(parsed.status());
    const FrameHeader h = *parsed;
    if (!hello_done_) {
      if (h.type != FrameType::kHello) return Close(InvalidArgument("KV peer: no hello first"));
      return ReadControlPayload(h, [](Session& s, const FrameHeader& hh) { s.OnHello(hh); });
    }
    switch (h.type) {
      case FrameType::kChunk:
        return OnChunk(h);
      case FrameType::kCancel:
        return ReadControlPayload(h, [](Session& s, const FrameHeader& hh) {
          Status why = hh.status == StatusCode::kOk ? Status(StatusCode::kCancelled, "")
                                                    : Status(hh.status, "");
          s.receiver_.FailFromPeer(s.peer_, hh.request_id, hh.secret,
                                   Status(why.code(), "KV sender: " + s.control_payload_));
          s.ReadHeader();
        });
      default:
        return Close(InvalidArgument(
            fmt::format("KV peer sent an unexpected {} frame", FrameTypeName(h.type))));
    }
  }

  template <typename Then>
  void ReadControlPayload(const FrameHeader& h, Then then) {
    control_payload_.resize(h.byte_count);  // bounded by ParseHeader
    asio::async_read(
        socket_, asio::buffer(control_payload_),
        [self = shared_from_this(), h, then](const boost::system::error_code& ec, size_t) {
          if (ec) return self->Close(Unavailable("KV peer lost: " + ec.message()));
          then(*self, h);
        });
  }

  void OnHello(const FrameHeader& h) {
    hello_done_ = true;
    hello_timer_.cancel();
    const KvLayout& layout = receiver_.layout();
    Status refusal;
    std::string reply;
    if (h.layout_hash != layout.hash) {
      refusal = FailedPrecondition("KV layout mismatch: this receiver has " + layout.Shape());
    } else if ((h.path != PayloadPath::kTcp) != listener_.options_.pools_on_device) {
      refusal = FailedPrecondition(fmt::format(
          "KV path {} cannot reach this receiver: its KV pages are in {} memory (send them by {})",
          PayloadPathName(h.path), listener_.options_.pools_on_device ? "GPU" : "host",
          listener_.options_.pools_on_device ? "nccl or ipc" : "tcp"));
    } else if (h.path != PayloadPath::kTcp) {
      std::vector<void*> bases(layout.n_layers);
      for (int l = 0; l < layout.n_layers; ++l) bases[l] = receiver_.layer_base(l);
      auto device = MakeDevicePayloadReceiver(h.path, layout, listener_.options_.device,
                                              std::move(bases), receiver_.pool().num_pages());
      if (device.ok()) {
        auto r = (*device)->OnHello(control_payload_, Clock::now() + std::chrono::seconds(30));
        if (r.ok()) {
          reply = std::move(*r);
          device_ = std::move(*device);
          // This sender writes pages before their headers: a request that Fails here may take
          // writes until the sender hears of it, so its pages wait before another can have them.
          if (device_->CompleteOnHeader()) receiver_.HoldFailedPages(kFailedPageHold);
        } else {
          refusal = r.status();
        }
      } else {
        refusal = device.status();
      }
    }
    path_ = h.path;
    if (!refusal.ok()) {
      spdlog::warn("KV listener: refusing a connection: {}", refusal.ToString());
      SendControl(FrameType::kHelloReply, 0, 0, 0, 0, refusal);
      closing_ = true;  // after the reply is written
      return;
    }
    SendControl(FrameType::kHelloReply, 0, 0, 0, 0, Status::Ok(), std::move(reply));
    ReadHeader();
  }

  void OnChunk(const FrameHeader& h) {
    if (h.path != path_) return Close(InvalidArgument("KV peer: chunk on another payload path"));
    auto target = receiver_.BeginChunk(peer_, h);
    if (!target.ok()) {
      if (!receiver_.PlausibleChunk(h)) return Close(target.status());
      if (path_ == PayloadPath::kTcp) return Drain(h, h.byte_count, target.status());
      if (device_->CompleteOnHeader()) {  // nothing to consume
        SendControl(FrameType::kAck, h.request_id, h.layer, h.first_page, h.page_count,
                    target.status());
        return ReadHeader();
      }
      // GPU path: consume the bytes in order so the pair stays in step, then nack.
      asio::post(ordered_, [self = shared_from_this(), h, why = target.status()] {
        Status s = self->device_->Discard(h.page_count * self->receiver_.layout().page_bytes(),
                                          Clock::now() + kDiscardTimeout);
        if (!s.ok()) spdlog::warn("KV listener: discarding a refused chunk: {}", s.ToString());
        self->PostAck(h, why);
      });
      return ReadHeader();
    }
    if (path_ != PayloadPath::kTcp && device_->CompleteOnHeader()) {
      // The bytes are in place: acknowledge here, without two thread hops, which would add to
      // every push's latency (docs/benchmarks.md, CUDA IPC).
      SendControl(FrameType::kAck, h.request_id, h.layer, h.first_page, h.page_count,
                  receiver_.EndChunk(peer_, h, Status::Ok()), {}, /*defer=*/true);
      return ReadHeader();
    }
    if (path_ != PayloadPath::kTcp) {
      asio::post(ordered_, [self = shared_from_this(), h, t = *target] {
        Status received = self->device_->Receive(t.dst, t.bytes, Clock::now() + kDiscardTimeout);
        self->PostAck(h, self->receiver_.EndChunk(self->peer_, h, received));
      });
      return ReadHeader();
    }
    ReadPayload(h, *target, 0, ChunkChecksum::Start(listener_.checksum_pool_));
  }

  // Reads a chunk's payload into its pages piece by piece, the CRC following each piece as it
  // lands (ChunkChecksum: on the worker pool, or here while the piece is in cache), then acks the
  // chunk once the CRC is in.
  void ReadPayload(const FrameHeader& h, const KvReceiver::ChunkTarget& t, size_t done,
                   std::shared_ptr<ChunkChecksum> checksum) {
    while (done < t.bytes) {
      auto* at = static_cast<unsigned char*>(t.dst) + done;
      auto n = ReadNow(asio::buffer(at, std::min(t.bytes - done, kPayloadPiece)));
      if (!n.ok()) return LoseChunk(h, *checksum, n.status());
      if (*n == 0) {  // nothing there yet: wait for the socket, then carry on from here
        FlushDeferred();
        socket_.async_wait(
            tcp::socket::wait_read,
            [self = shared_from_this(), h, t, done,
             checksum = std::move(checksum)](const boost::system::error_code& ec) mutable {
              if (ec) {
                return self->LoseChunk(h, *checksum, Unavailable("KV peer lost: " + ec.message()));
              }
              self->inline_frames_ = 0;
              self->ReadPayload(h, t, done, std::move(checksum));
            });
        return;
      }
      checksum->Add(at, *n);
      done += *n;
    }
    // The callback may run on a pool thread: it takes the peer id now, as Close clears peer_.
    checksum->Finish([self = shared_from_this(), peer = peer_, h](uint32_t crc, bool inline_call) {
      Status applied =
          crc == h.payload_crc
              ? Status::Ok()
              : DataLoss(fmt::format("KV chunk CRC32C mismatch (request {} layer {} page {}: "
                                     "header {:08x}, payload {:08x})",
                                     h.request_id, h.layer, h.first_page, h.payload_crc, crc));
      const Status ack = self->receiver_.EndChunk(peer, h, applied);
      if (!inline_call) return self->PostAck(h, ack);
      self->SendControl(FrameType::kAck, h.request_id, h.layer, h.first_page, h.page_count, ack, {},
                        /*defer=*/true);
    });
    ReadHeader();
  }

  // The connection failed mid-chunk: the chunk's pages stay pinned until its checksum tasks
  // (which read them) are through, then the chunk ends failed; the session closes now.
  void LoseChunk(const FrameHeader& h, ChunkChecksum& checksum, const Status& why) {
    checksum.Finish([self = shared_from_this(), peer = peer_, h](uint32_t, bool) {
      (void)self->receiver_.EndChunk(peer, h, Unavailable("KV peer lost mid-chunk"));
    });
    Close(why);
  }

  // Reads and drops a refused chunk's payload, then nacks it; the connection carries on.
  void Drain(const FrameHeader& h, uint64_t left, const Status& why) {
    if (left == 0) {
      SendControl(FrameType::kAck, h.request_id, h.layer, h.first_page, h.page_count, why);
      return ReadHeader();
    }
    if (drain_.empty()) drain_.resize(kDrainBuffer);
    const size_t n = std::min<uint64_t>(left, drain_.size());
    asio::async_read(
        socket_, asio::buffer(drain_.data(), n), LargeTransfers{},
        [self = shared_from_this(), h, left, n, why](const boost::system::error_code& ec, size_t) {
          if (ec) return self->Close(Unavailable("KV peer lost: " + ec.message()));
          self->Drain(h, left - n, why);
        });
  }

  void PostAck(const FrameHeader& h, const Status& status) {
    asio::post(listener_.io_, [self = shared_from_this(), h, status] {
      self->SendControl(FrameType::kAck, h.request_id, h.layer, h.first_page, h.page_count, status);
    });
  }

  // I/O thread. Queues an ack, cancel or hello reply; `payload` defaults to the error message.
  void SendControl(FrameType type, uint64_t id, uint32_t layer, int32_t first, uint32_t count,
                   const Status& status, std::string payload = {}, bool defer = false) {
    if (closed_) return;
    if (!status.ok()) payload = status.message().substr(0, 1024);
    FrameHeader h;
    h.type = type;
    h.path = path_;
    h.request_id = id;
    h.layout_hash = receiver_.layout().hash;
    h.layer = layer;
    h.first_page = first;
    h.page_count = count;
    h.status = status.code();
    h.byte_count = payload.size();
    write_queue_.push_back({EncodeHeader(h), std::move(payload)});
    if (writing_) return;
    if (defer) {
      const auto now = Clock::now();
      if (write_queue_.size() == 1) first_deferred_ = now;
      if (now - first_deferred_ < kMaxAckDelay) return;
    }
    StartWrite();
  }

  // Acks of chunks read inline wait in the queue while more frames are already in the socket, and
  // go out together before the session waits for input, or with the first ack queued after the
  // oldest has waited kMaxAckDelay (so a steady stream is acked at least every chunk or so): one
  // write and one wake-up of the sender for a run of chunks instead of one each.
  void FlushDeferred() {
    if (!writing_ && !write_queue_.empty()) StartWrite();
  }

  void StartWrite() {
    if (write_queue_.empty() || closed_) {
      writing_ = false;
      if (closing_) Close(Status::Ok());
      return;
    }
    writing_ = true;
    // Every queued frame in one gather write: acks of many chunks cost one syscall.
    const size_t n = std::min<size_t>(write_queue_.size(), 64);
    write_buffers_.clear();
    for (size_t i = 0; i < n; ++i) {
      write_buffers_.push_back(asio::buffer(write_queue_[i].first));
      write_buffers_.push_back(asio::buffer(write_queue_[i].second));
    }
    asio::async_write(socket_, write_buffers_, LargeTransfers{},
                      [self = shared_from_this(), n](const boost::system::error_code& ec, size_t) {
                        if (ec) return self->Close(Unavailable("KV peer lost: " + ec.message()));
                        if (self->closed_) return;  // Close emptied the queue
                        self->write_queue_.erase(self->write_queue_.begin(),
                                                 self->write_queue_.begin() + n);
                        self->StartWrite();
                      });
  }

  void Close(const Status& why) {
    if (closed_) return;
    closed_ = true;
    if (!why.ok()) spdlog::debug("KV listener: closing a connection: {}", why.ToString());
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    hello_timer_.cancel();
    write_queue_.clear();
    // Fail the peer's requests now, not when the last handler lets go of the session.
    if (peer_ != 0) {
      receiver_.RemovePeer(peer_, why.ok() ? Unavailable("KV peer connection closed") : why);
      peer_ = 0;
    }
  }

  Impl& listener_;
  KvReceiver& receiver_;
  tcp::socket socket_;
  asio::strand<asio::thread_pool::executor_type> ordered_;  // GPU receives, in chunk order
  asio::steady_timer hello_timer_;
  // I/O thread only:
  KvReceiver::PeerId peer_ = 0;
  bool hello_done_ = false;
  bool closing_ = false;
  bool closed_ = false;
  PayloadPath path_ = PayloadPath::kTcp;
  std::unique_ptr<DevicePayloadReceiver> device_;
  HeaderBytes header_{};
  int inline_frames_ = 0;  // frames handled inline since the last reactor round
  std::string control_payload_;
  std::vector<unsigned char> drain_;
  std::deque<std::pair<HeaderBytes, std::string>> write_queue_;
  std::vector<asio::const_buffer> write_buffers_;  // the write in flight
  Clock::time_point first_deferred_;               // when the oldest deferred ack was queued
  bool writing_ = false;
};

void TcpKvListener::Impl::Accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) std::make_shared<Session>(*this, std::move(socket))->Start();
    accept_backoff_.Next(ec, [this] { Accept(); });
  });
}

Result<std::unique_ptr<TcpKvListener>> TcpKvListener::Start(KvReceiver& receiver,
                                                            TcpKvListenerOptions options) {
  auto impl = std::make_unique<Impl>(receiver, std::move(options));
  PDSERVE_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<TcpKvListener>(new TcpKvListener(std::move(impl)));
}

TcpKvListener::TcpKvListener(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpKvListener::~TcpKvListener() = default;
uint16_t TcpKvListener::port() const { return impl_->port(); }
int TcpKvListener::connections() const { return impl_->connections(); }

}  // namespace pdserve::kv_transfer
