// TCP congestion control for KV sockets. KV transfer is bursty and application-limited: a layer's
// chunks go out back to back, then the connection idles until the next layer or request. BBR (a
// common host default on cloud images) models the path from such flows and paces below what the
// link carries: on this project's loopback benchmark it halved KV bandwidth against a loss-based
// algorithm. So KV sockets choose their algorithm: "auto" keeps the host default unless that is
// bbr, and then takes cubic, or reno where cubic is not allowed to unprivileged processes.
// Called by the TCP transport, the KV listener and `pdserve bench kv`; safe from any thread.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace pdserve::kv_transfer {

// The algorithm to set for `requested`: "auto" resolved as above, "" or "default" for the host
// default (returned as ""), anything else as given.
std::string ResolveCongestionControl(std::string_view requested);

// Sets the resolved algorithm on a TCP socket; nothing for "" / "default". An algorithm the
// kernel refuses (unknown, or not in net.ipv4.tcp_allowed_congestion_control) is an error naming
// it and the algorithms this process may choose.
Status SetCongestionControl(int fd, std::string_view requested);

// What the socket uses now (for logs and benchmark records); "" if it cannot be read.
std::string CongestionControlOf(int fd);

}  // namespace pdserve::kv_transfer
