// Fuzz target: control frames (common/framed_connection.h) as a peer on the control port sends
// them: the input is written into a real loopback TCP connection read by a FramedConnection
// with a small frame limit, as the gateway reads a connection that has not registered. Every
// byte stream ends in the close handler with a Status (end of stream, a frame over the limit, a
// frame that does not parse as an Envelope), after the messages before it were handed on.
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include <google/protobuf/stubs/logging.h>
#include "common/framed_connection.h"
#include "common/status.h"
#include "proto/control.pb.h"

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

constexpr size_t kMaxFrameBytes = 4096;

struct Loopback {
  asio::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
};

Loopback& Net() {
  static Loopback* net = [] {
    // libprotobuf logs each string field that is not UTF-8; a fuzz run would log millions.
    google::protobuf::SetLogHandler(
        [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
    return new Loopback();  // lives as long as the process
  }();
  return *net;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Loopback& net = Net();
  tcp::socket client(net.io);
  client.connect(net.acceptor.local_endpoint());
  tcp::socket server = net.acceptor.accept();
  // The client resets on close, so that a million connections leave no TIME_WAIT behind.
  client.set_option(asio::socket_base::linger(true, 0));

  size_t messages = 0;
  bool closed = false;
  auto connection = pdserve::FramedConnection::Create(std::move(server), kMaxFrameBytes);
  connection->Start(
      [&](pdserve::proto::Envelope&& message) {
        if (closed) abort();  // no message after the close handler
        ++messages;
        (void)message.ByteSizeLong();
      },
      [&](const pdserve::Status& why) {
        if (closed || why.ok()) abort();  // exactly once, with a reason
        closed = true;
      });
  asio::write(client, asio::buffer(data, size));
  client.shutdown(tcp::socket::shutdown_send);
  net.io.restart();
  net.io.run();
  if (!closed) abort();
  // Each message came in a frame of its own, with a 4-byte length. (Re-encoded, a message may
  // be longer than it came: an unpacked repeated field goes out packed.)
  if (messages * 4 > size) abort();
  client.close();
  return 0;
}
