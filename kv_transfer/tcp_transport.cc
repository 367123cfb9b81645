// TcpTransport: the sending side of the TCP side channel. One I/O thread owns the socket's
// reads (acks, cancels) and its lifetime. Writes go through one queue under write_mu_, drained by
// whichever thread finds it idle: a caller pushing a layer writes straight into the socket (no
// thread hand-off before the first byte), and when the socket is full the I/O thread carries on
// as it drains.
#include "kv_transfer/tcp_transport.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <cerrno>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "kv_transfer/checksum_offload.h"
#include "kv_transfer/crc32c.h"
#include "kv_transfer/device_payload.h"
#include "kv_transfer/outgoing_transfers.h"
#include "kv_transfer/payload_splicer.h"
#include "kv_transfer/tcp_congestion.h"

namespace pdserve::kv_transfer {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

struct OutFrame {
  HeaderBytes header{};
  const void* payload = nullptr;  // pool memory (chunks) or owned.data()
  size_t bytes = 0;
  std::vector<unsigned char> owned;
  uint64_t request_id = 0;
  bool chunk = false;
  // The payload is KV pool memory, unchanged until the chunk is acked, in a push big enough to
  // be spliced (TcpTransportOptions::splice_min_layer_bytes).
  bool splice = false;
  // TCP chunks: the header is finished (CRC, encoding) just before the frame's first byte is
  // written, or while the frame before it drains from the socket (Seal).
  bool needs_crc = false;
  FrameHeader pending;
  size_t sent = 0;  // of header and payload, already in the socket
};

// Runs `io` until `*done` or the deadline; on timeout cancels the socket's operations.
Status RunUntil(asio::io_context& io, tcp::socket& socket, const bool* done,
                Clock::time_point deadline, std::string_view what) {
  io.restart();
  while (!*done && io.run_one_until(deadline) > 0) {
  }
  if (*done) return Status::Ok();
  boost::system::error_code ignored;
  socket.close(ignored);
  io.restart();
  io.poll();  // let the cancelled handlers run
  return {StatusCode::kDeadlineExceeded, fmt::format("KV connect: {} timed out", what)};
}

Status FromError(const boost::system::error_code& ec, std::string_view what) {
  return Unavailable(fmt::format("KV peer: {}: {}", what, ec.message()));
}

}  // namespace

class TcpTransport::Impl {
 public:
  Impl(const KvLayout& layout, std::vector<const void*> bases, int num_pages,
       TcpTransportOptions options)
      : layout_(layout),
        bases_(std::move(bases)),
        options_(std::move(options)),
        socket_(io_),
        table_(layout.n_layers, num_pages,
               [this](uint64_t id, const Status& why) { PostCancel(id, why); }) {}

  ~Impl() {
    asio::post(io_, [this] { Lost(Unavailable("KV transport closed")); });
    work_.reset();
    if (thread_.joinable()) thread_.join();
    table_.FailAll(Unavailable("KV transport closed"));
  }

  Status Connect() {
    if (static_cast<int>(bases_.size()) != layout_.n_layers) {
      return InvalidArgument("KV transport: layer bases do not match the layout's layers");
    }
    if (options_.path != PayloadPath::kTcp) {
      PDSERVE_ASSIGN_OR_RETURN(device_,
                               MakeDevicePayloadSender(options_.path, layout_, options_.device));
    }
    const auto deadline = Clock::now() + options_.connect_timeout;
    bool done = false;
    boost::system::error_code error;
    tcp::resolver resolver(io_);
    tcp::resolver::results_type endpoints;
    resolver.async_resolve(options_.host, std::to_string(options_.port),
                           [&](const boost::system::error_code& ec, tcp::resolver::results_type r) {
                             error = ec, endpoints = std::move(r), done = true;
                           });
    PDSERVE_RETURN_IF_ERROR(RunUntil(io_, socket_, &done, deadline, "resolve"));
    if (error) return FromError(error, "resolve " + options_.host);
    done = false;
    const auto dial_deadline = std::min(deadline, Clock::now() + options_.dial_timeout);
    asio::async_connect(socket_, endpoints, [&](const boost::system::error_code& ec, auto&&) {
      error = ec, done = true;
    });
    PDSERVE_RETURN_IF_ERROR(RunUntil(io_, socket_, &done, dial_deadline, "connect"));
    if (error) return FromError(error, fmt::format("connect {}:{}", options_.host, options_.port));
    socket_.set_option(tcp::no_delay(true), error);
    PDSERVE_RETURN_IF_ERROR(
        SetCongestionControl(socket_.native_handle(), options_.congestion_control));

    // Hello: our layout hash and payload path; the listener refuses a mismatch before any data.
    std::string hello_payload;
    if (device_) {
      PDSERVE_ASSIGN_OR_RETURN(hello_payload, device_->HelloPayload());
    }
    FrameHeader hello;
    hello.type = FrameType::kHello;
    hello.path = options_.path;
    hello.layout_hash = layout_.hash;
    hello.byte_count = hello_payload.size();
    const HeaderBytes hello_bytes = EncodeHeader(hello);
    done = false;
    asio::async_write(
        socket_,
        std::array<asio::const_buffer, 2>{asio::buffer(hello_bytes), asio::buffer(hello_payload)},
        [&](const boost::system::error_code& ec, size_t) { error = ec, done = true; });
    PDSERVE_RETURN_IF_ERROR(RunUntil(io_, socket_, &done, deadline, "hello"));
    if (error) return FromError(error, "send hello");

    done = false;
    asio::async_read(socket_, asio::buffer(read_header_),
                     [&](const boost::system::error_code& ec, size_t) { error = ec, done = true; });
    PDSERVE_RETURN_IF_ERROR(RunUntil(io_, socket_, &done, deadline, "hello reply"));
    if (error) return FromError(error, "read hello reply");
    PDSERVE_ASSIGN_OR_RETURN(FrameHeader reply, ParseHeader(read_header_));
    if (reply.type != FrameType::kHelloReply) {
      return InvalidArgument("KV connect: the peer did not answer the hello");
    }
    std::string reply_payload(reply.byte_count, '\0');
    done = false;
    asio::async_read(socket_, asio::buffer(reply_payload),
                     [&](const boost::system::error_code& ec, size_t) { error = ec, done = true; });
    PDSERVE_RETURN_IF_ERROR(RunUntil(io_, socket_, &done, deadline, "hello reply"));
    if (error) return FromError(error, "read hello reply");
    if (reply.status != StatusCode::kOk) {
      return Status(reply.status, "KV connect refused by the receiver: " + reply_payload);
    }
    if (device_) PDSERVE_RETURN_IF_ERROR(device_->OnHelloReply(reply_payload, deadline));
    if (options_.path == PayloadPath::kTcp && options_.splice_min_layer_bytes != kNeverSplice) {
      auto splicer = PayloadSplicer::Make();
      if (splicer.ok()) {
        splicer_.emplace(std::move(*splicer));
      } else {
        spdlog::warn("KV transport: payloads will be copied into the socket: {}",
                     splicer.status().ToString());
      }
    }

    if (options_.path == PayloadPath::kTcp && options_.offload_checksums) {
      const int cpus = AllowedCpus();
      if (cpus >= 2) {
        parallel_crc_ = std::make_unique<ParallelCrc32c>(options_.checksum_threads);
        spdlog::info("KV transport to {}:{}: chunk CRCs are computed on {} threads ({} CPUs)",
                     options_.host, options_.port, parallel_crc_->threads() + 1, cpus);
      } else {
        spdlog::info(
            "KV transport to {}:{}: chunk CRCs are computed on the writing thread: "
            "one CPU only",
            options_.host, options_.port);
      }
    }
    io_.restart();
    socket_.non_blocking(true, error);  // ReadControl reads what is there, then waits
    inbox_.resize(kHeaderBytes + kMaxControlPayload);
    ReadControl();
    thread_ = std::thread([this] { io_.run(); });
    return Status::Ok();
  }

  const KvLayout& layout() const { return layout_; }
  OutgoingTransfers& table() { return table_; }
  const OutgoingTransfers& table() const { return table_; }
  bool connected() const { return !lost_.load(); }

  Status PushLayer(uint64_t id, int layer) {
    const size_t page_bytes = layout_.page_bytes();
    // CUDA IPC moves no bytes over the socket: its chunks are runs of pages cut only so that
    // their headers can leave while the rest of the layer copies (device_piece_bytes).
    const bool copies_first = options_.path != PayloadPath::kTcp && device_->SendsBeforeHeader();
    const size_t chunk_bytes =
        copies_first ? options_.device_piece_bytes : options_.max_chunk_bytes;
    const auto max_pages = static_cast<int32_t>(
        std::clamp<size_t>(chunk_bytes / page_bytes, 1, std::numeric_limits<int32_t>::max()));
    const auto lead_pages =
        options_.path == PayloadPath::kTcp && options_.lead_chunk_bytes > 0
            ? static_cast<int32_t>(std::max<size_t>(1, options_.lead_chunk_bytes / page_bytes))
            : 0;
    PDSERVE_ASSIGN_OR_RETURN(auto chunks, table_.BeginLayer(id, layer, max_pages, lead_pages));
    const auto* base = static_cast<const unsigned char*>(bases_[layer]);
    std::lock_guard push_lock(push_mu_);  // GPU paths: headers and device sends in one order
    auto src_of = [&](const PageRun& c) {
      return base + static_cast<size_t>(c.src_first) * page_bytes;
    };
    auto bytes_of = [&](const PageRun& c) { return static_cast<size_t>(c.count) * page_bytes; };
    size_t layer_bytes = 0;
    for (const PageRun& c : chunks) layer_bytes += bytes_of(c);
    const bool splice = layer_bytes >= options_.splice_min_layer_bytes &&
                        layer_bytes <= options_.splice_max_layer_bytes;
    const auto device_deadline = Clock::now() + std::chrono::seconds(60);
    const TransferSecret secret = table_.Secret(id);
    auto frame_of = [&](const PageRun& c) {
      OutFrame f;
      f.chunk = true;
      f.request_id = id;
      FrameHeader h;
      h.type = FrameType::kChunk;
      h.path = options_.path;
      h.request_id = id;
      h.layout_hash = layout_.hash;
      h.secret = secret;
      h.layer = static_cast<uint32_t>(layer);
      h.first_page = c.dst_first;
      h.page_count = static_cast<uint32_t>(c.count);
      if (options_.path == PayloadPath::kTcp) {
        h.byte_count = bytes_of(c);
        f.payload = src_of(c);
        f.bytes = bytes_of(c);
        f.splice = splice;
        f.needs_crc = true;
        f.pending = h;
      } else {
        f.header = EncodeHeader(h);
      }
      return f;
    };
    if (copies_first) {  // every copy of the layer, then each header as its copy is done
      for (const PageRun& c : chunks) {
        Status s = device_->Send(src_of(c), layer, c.dst_first, bytes_of(c), device_deadline);
        if (!s.ok()) return FailAndTell(id, s);
      }
      size_t headed = 0;
      std::vector<OutFrame> ready;  // the headers whose copies just finished
      Status s = device_->FlushInOrder(device_deadline, chunks.size(), [&](size_t done) {
        ready.clear();
        for (; headed < done; ++headed) ready.push_back(frame_of(chunks[headed]));
        WriteFrames(ready);
      });
      if (!s.ok()) {
        // Copies may still be queued on a stuck GPU, and would land whenever it moves: this
        // connection copies no more (the receiver fails its requests when it closes).
        asio::post(io_, [this, s] { Lost(s); });
        return FailAndTell(id, s);
      }
      return Status::Ok();
    }
    if (options_.path == PayloadPath::kTcp) {  // queued together, written from this thread
      std::vector<OutFrame> batch;
      for (const PageRun& c : chunks) batch.push_back(frame_of(c));
      WriteFrames(batch);
      return Status::Ok();
    }
    for (const PageRun& c : chunks) {
      // NCCL: the receiver posts its receive on the header, which the I/O thread sends while
      // this one blocks in the send.
      asio::post(io_, [this, f = frame_of(c)]() mutable { Enqueue(std::move(f)); });
      Status s = device_->Send(src_of(c), layer, c.dst_first, bytes_of(c), device_deadline);
      if (!s.ok()) return FailAndTell(id, s);
    }
    return Status::Ok();
  }

 private:
  // Queues `frames` and writes what the socket takes from this thread; the I/O thread carries
  // on when it is full. A write error loses the connection (the table fails its requests).
  void WriteFrames(std::vector<OutFrame>& frames) {
    if (frames.empty()) return;
    std::lock_guard lock(write_mu_);
    if (lost_) return;  // the table has failed the request; Wait says why
    for (OutFrame& f : frames) write_queue_.push_back(std::move(f));
    if (writing_) {
      SealNext();  // the socket is full and the I/O thread will carry on
      return;
    }
    writing_ = true;
    if (Status s = WriteQueued(); !s.ok()) {
      asio::post(io_, [this, s] { Lost(s); });
    }
  }

  Status FailAndTell(uint64_t id, const Status& why) {
    table_.Cancel(id, why);
    return why;
  }

  // From any thread: tells the receiver that the request failed here.
  void PostCancel(uint64_t id, const Status& why) {
    OutFrame f;
    const std::string msg = why.message().substr(0, 1024);
    f.owned.assign(msg.begin(), msg.end());
    FrameHeader h;
    h.type = FrameType::kCancel;
    h.request_id = id;
    h.layout_hash = layout_.hash;
    h.secret = table_.Secret(id);
    h.status = why.code();
    h.byte_count = f.owned.size();
    f.header = EncodeHeader(h);
    asio::post(io_, [this, f = std::move(f)]() mutable {
      f.payload = f.owned.data();
      f.bytes = f.owned.size();
      Enqueue(std::move(f));
    });
  }

  // I/O thread: queues a control frame or a GPU chunk's header.
  void Enqueue(OutFrame f) {
    Status s;
    {
      std::lock_guard lock(write_mu_);
      if (lost_) return;
      write_queue_.push_back(std::move(f));
      if (writing_) return SealNext();
      writing_ = true;
      s = WriteQueued();
    }
    if (!s.ok()) Lost(s);
  }

  // Any thread, under write_mu_, with writing_ set: writes queued frames while the socket takes
  // them. When it is full, checksums the next chunk while it drains and leaves the rest to the
  // I/O thread (it stays writing_); when the queue is empty, clears writing_. An error is for the
  // caller to hand to Lost, outside the lock.
  Status WriteQueued() {
    for (;;) {
      // Chunks of requests that failed meanwhile are not sent, unless partly on the wire.
      while (!write_queue_.empty() && write_queue_.front().chunk &&
             write_queue_.front().sent == 0 && !table_.Live(write_queue_.front().request_id)) {
        write_queue_.pop_front();
      }
      if (write_queue_.empty()) {
        writing_ = false;
        return Status::Ok();
      }
      OutFrame& f = write_queue_.front();
      Seal(f);
      const bool splice = f.splice && splicer_.has_value();
      if (splice && f.sent >= kHeaderBytes) {
        const size_t done = f.sent - kHeaderBytes;
        auto n =
            splicer_->Send(socket_.native_handle(),
                           static_cast<const unsigned char*>(f.payload) + done, f.bytes - done);
        if (!n.ok()) {
          if (n.status().code() != StatusCode::kFailedPrecondition) return n.status();
          spdlog::warn("KV transport: copying payloads into the socket from now on: {}",
                       n.status().ToString());
          splicer_.reset();
          continue;
        }
        f.sent += *n;
        if (*n > 0 && !spliced_any_) {
          spliced_any_ = true;
          spdlog::info("KV transport to {}:{}: payloads go into the socket by reference",
                       options_.host, options_.port);
        }
        if (f.sent < kHeaderBytes + f.bytes) return WaitForRoom();
        write_queue_.pop_front();
        continue;
      }
      iovec iov[2];
      int n_iov = 0;
      if (f.sent < kHeaderBytes) {
        iov[n_iov++] = {f.header.data() + f.sent, kHeaderBytes - f.sent};
        if (f.bytes > 0 && !splice) iov[n_iov++] = {const_cast<void*>(f.payload), f.bytes};
      } else {
        const size_t done = f.sent - kHeaderBytes;
        iov[n_iov++] = {static_cast<unsigned char*>(const_cast<void*>(f.payload)) + done,
                        f.bytes - done};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = n_iov;
      // A spliced chunk's header goes alone, and its payload follows at once.
      const int more = splice ? MSG_MORE : 0;
      const ssize_t n =
          ::sendmsg(socket_.native_handle(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT | more);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return WaitForRoom();
        return Unavailable(fmt::format("KV peer: write: {}", std::strerror(errno)));
      }
      f.sent += static_cast<size_t>(n);
      if (f.sent == kHeaderBytes + f.bytes) write_queue_.pop_front();
    }
  }

  // Under write_mu_, the socket full: checksums the next chunk while it drains, and leaves the
  // rest to the I/O thread (writing_ stays set).
  Status WaitForRoom() {
    SealNext();
    asio::post(io_, [this] { AwaitWritable(); });
    return Status::Ok();
  }

  // I/O thread: carries on writing once the socket has room.
  void AwaitWritable() {
    if (lost_) return;
    socket_.async_wait(tcp::socket::wait_write, [this](const boost::system::error_code& ec) {
      if (ec) return Lost(FromError(ec, "write"));
      Status s;
      {
        std::lock_guard lock(write_mu_);
        if (lost_) return;
        s = WriteQueued();
      }
      if (!s.ok()) Lost(s);
    });
  }

  // Under write_mu_: the frame after the one in the socket gets its checksum now, while that
  // one drains, so it is ready when the socket has room.
  void SealNext() {
    if (write_queue_.size() > 1) Seal(write_queue_[1]);
  }

  // Under write_mu_: finishes a TCP chunk's header: the payload's CRC, then the encoding.
  void Seal(OutFrame& f) {
    if (!f.needs_crc) return;
    f.needs_crc = false;
    f.pending.payload_crc =
        parallel_crc_ ? (*parallel_crc_)(f.payload, f.bytes) : Crc32cFromMemory(f.payload, f.bytes);
    if (chunk_index_++ == options_.flip_bit_in_chunk) {  // tests: damage it on the wire
      const auto* src = static_cast<const unsigned char*>(f.payload);
      f.owned.assign(src, src + f.bytes);
      f.owned[f.bytes / 2] ^= 0x10;
      f.payload = f.owned.data();
      f.splice = false;  // owned bytes are freed once written: they are copied
    }
    f.header = EncodeHeader(f.pending);
  }

  // Acks and cancels. Takes whatever the socket holds (often several acks at once, in one system
  // call), handles every whole frame in it, and waits for the socket only when it is empty.
  void ReadControl() {
    for (;;) {
      size_t used = 0;
      while (inbox_len_ - used >= kHeaderBytes) {
        HeaderBytes bytes;
        std::memcpy(bytes.data(), inbox_.data() + used, kHeaderBytes);
        auto h = ParseHeader(bytes);
        if (!h.ok()) return Lost(h.status());
        if (h->type != FrameType::kAck && h->type != FrameType::kCancel) {
          return Lost(InvalidArgument(
              fmt::format("KV peer sent an unexpected {} frame", FrameTypeName(h->type))));
        }
        if (h->byte_count > kMaxControlPayload) {
          return Lost(InvalidArgument("KV peer sent an oversized control payload"));
        }
        if (inbox_len_ - used - kHeaderBytes < h->byte_count) break;  // the rest is on its way
        const char* payload = reinterpret_cast<const char*>(inbox_.data() + used + kHeaderBytes);
        read_payload_.assign(payload, h->byte_count);
        used += kHeaderBytes + h->byte_count;
        OnControl(*h);
      }
      std::memmove(inbox_.data(), inbox_.data() + used, inbox_len_ - used);
      inbox_len_ -= used;
      boost::system::error_code ec;
      const size_t n = socket_.read_some(
          asio::buffer(inbox_.data() + inbox_len_, inbox_.size() - inbox_len_), ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) break;
      if (ec) return Lost(FromError(ec, "read"));
      inbox_len_ += n;
    }
    socket_.async_wait(tcp::socket::wait_read, [this](const boost::system::error_code& ec) {
      if (ec) return Lost(FromError(ec, "read"));
      ReadControl();
    });
  }

  void OnControl(const FrameHeader& h) {
    Status s = h.status == StatusCode::kOk ? Status::Ok() : Status(h.status, read_payload_);
    if (h.type == FrameType::kAck) {
      table_.OnAck(h.request_id, h.layer, h.first_page, s);
    } else {
      if (s.ok()) s = Status(StatusCode::kCancelled, "cancelled by the KV receiver");
      table_.FailFromPeer(h.request_id, s.WithContext("KV receiver"));
    }
  }

  // I/O thread, not under write_mu_.
  void Lost(const Status& why) {
    {
      std::lock_guard lock(write_mu_);  // no caller is writing into the socket as it closes
      if (lost_.exchange(true)) return;
      boost::system::error_code ignored;
      socket_.close(ignored);
      write_queue_.clear();
      splicer_.reset();
      writing_ = false;
    }
    spdlog::debug("KV transport to {}:{} lost: {}", options_.host, options_.port, why.ToString());
    table_.FailAll(why);
  }

  const KvLayout layout_;
  const std::vector<const void*> bases_;
  const TcpTransportOptions options_;
  asio::io_context io_;
  tcp::socket socket_;
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(io_);
  std::unique_ptr<DevicePayloadSender> device_;
  std::mutex push_mu_;
  std::mutex write_mu_;
  std::deque<OutFrame> write_queue_;  // guarded by write_mu_
  // Guarded by write_mu_: TCP payloads by reference; empty when the host refused, or copying.
  std::optional<PayloadSplicer> splicer_;
  // Set by Connect (TcpTransportOptions::offload_checksums); used under write_mu_ by Seal.
  std::unique_ptr<ParallelCrc32c> parallel_crc_;
  bool spliced_any_ = false;  // guarded by write_mu_: logged once, at the first spliced bytes
  int64_t chunk_index_ = 0;   // guarded by write_mu_: TCP chunks sealed
  // Guarded by write_mu_: a thread is in WriteQueued, or the I/O thread waits to carry on.
  bool writing_ = false;
  // I/O thread only:
  HeaderBytes read_header_{};  // the hello reply
  std::string read_payload_;
  std::vector<unsigned char> inbox_;  // control frames read but not yet handled
  size_t inbox_len_ = 0;
  std::atomic<bool> lost_{false};
  OutgoingTransfers table_;  // after the I/O members: its callback posts to io_
  std::thread thread_;
};

Result<std::unique_ptr<TcpTransport>> TcpTransport::Connect(const KvLayout& layout,
                                                            std::vector<const void*> layer_bases,
                                                            int num_pages,
                                                            TcpTransportOptions options) {
  if (options.port == 0) return InvalidArgument("KV connect: no port");
  if (options.max_chunk_bytes == 0) return InvalidArgument("KV connect: max_chunk_bytes is 0");
  if (options.device_piece_bytes == 0) {
    return InvalidArgument("KV connect: device_piece_bytes is 0");
  }
  auto impl = std::make_unique<Impl>(layout, std::move(layer_bases), num_pages, std::move(options));
  PDSERVE_RETURN_IF_ERROR(impl->Connect());
  return std::unique_ptr<TcpTransport>(new TcpTransport(std::move(impl)));
}

TcpTransport::TcpTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpTransport::~TcpTransport() = default;

const KvLayout& TcpTransport::layout() const { return impl_->layout(); }
Status TcpTransport::Open(const OutgoingRequest& request) {
  if (!impl_->connected()) return Unavailable("KV transport: the connection is lost");
  return impl_->table().Open(request);
}
Status TcpTransport::PushLayer(uint64_t request_id, int layer) {
  return impl_->PushLayer(request_id, layer);
}
Status TcpTransport::Wait(uint64_t request_id) { return impl_->table().Wait(request_id); }
void TcpTransport::Cancel(uint64_t request_id, std::string_view reason) {
  impl_->table().Cancel(request_id, Status(StatusCode::kCancelled, std::string(reason)));
}
std::optional<TransferState> TcpTransport::State(uint64_t request_id) const {
  return impl_->table().State(request_id);
}
bool TcpTransport::connected() const { return impl_->connected(); }

}  // namespace pdserve::kv_transfer
