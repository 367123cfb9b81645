// Blocking TCP sockets for `pdserve bench kv` (bench_kv_command.cc): the driver and receiver's
// control channel (messages of a 4-byte length and JSON) and the plain-socket baseline, every
// wait bounded by a timeout. Errors say "bench kv: ..." and what failed. Any thread, a socket
// at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace pdserve::bench {

// The options of the KV sockets: no Nagle, and the same congestion control (which moves
// loopback bandwidth more than anything else), plus a timeout on every send and receive.
Status ConfigureSocket(int fd, const std::string& congestion);

// Closes a socket when the scope that opened it ends.
struct FdCloser {
  int fd;
  ~FdCloser();
};

Status SendAll(int fd, const void* data, size_t n);
Status RecvAll(int fd, void* data, size_t n);
// A control message: its length (4 bytes, network order), then its JSON text.
Status SendJson(int fd, const nlohmann::json& j);
// One control message; refuses one over 16 MiB, or that is not a JSON object.
Result<nlohmann::json> RecvJson(int fd);

// A listening socket on `port` (0: the OS picks; `*bound` says which), on every address or
// loopback only.
Result<int> ListenOn(int port, bool any_host, uint16_t* bound);
// A connected, configured socket to host:port.
Result<int> Dial(const std::string& host, uint16_t port, const std::string& congestion);

}  // namespace pdserve::bench
