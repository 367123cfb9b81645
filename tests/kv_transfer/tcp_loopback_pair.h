// For the TCP transport's tests in one process: a sender's host pool and transport connected
// over loopback TCP to a listener feeding a receiver's host pool. One thread per pair.
#pragma once

#include <memory>

#include "kv_transfer/tcp_transport.h"
#include "tests/kv_transfer/kv_test_util.h"

namespace pdserve::kv_transfer::testing {

// The receiver's layout is SmallLayout(3), 64 pages on each side; the sender's is
// `sender_layout` (a different one to test a mismatch). `connected` holds the transport, or why
// it did not connect.
struct LoopbackPair {
  explicit LoopbackPair(KvLayout sender_layout, TcpTransportOptions o = {},
                        TcpKvListenerOptions lo = {})
      : layout(SmallLayout(3)),
        send(sender_layout, 64),
        recv(layout, 64),
        receiver(layout, recv.pool, recv.bases()),
        listener(TcpKvListener::Start(receiver, lo).value()) {
    o.port = listener->port();
    connected = TcpTransport::Connect(sender_layout, send.const_bases(), 64, o);
  }
  KvLayout layout;
  HostKvPool send, recv;
  KvReceiver receiver;
  std::unique_ptr<TcpKvListener> listener;
  Result<std::unique_ptr<TcpTransport>> connected = Internal("not yet");
};

}  // namespace pdserve::kv_transfer::testing
