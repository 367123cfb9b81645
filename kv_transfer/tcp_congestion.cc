#include "kv_transfer/tcp_congestion.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace pdserve::kv_transfer {
namespace {

std::string ReadProcLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool Lists(const std::string& names, std::string_view name) {
  std::istringstream words(names);
  std::string w;
  while (words >> w) {
    if (w == name) return true;
  }
  return false;
}

}  // namespace

std::string ResolveCongestionControl(std::string_view requested) {
  if (requested.empty() || requested == "default") return "";
  if (requested != "auto") return std::string(requested);
  const std::string host = ReadProcLine("/proc/sys/net/ipv4/tcp_congestion_control");
  if (host != "bbr") return "";
  const std::string allowed = ReadProcLine("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
  return Lists(allowed, "cubic") ? "cubic" : "reno";
}

Status SetCongestionControl(int fd, std::string_view requested) {
  const std::string name = ResolveCongestionControl(requested);
  if (name.empty()) return Status::Ok();
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                 static_cast<socklen_t>(name.size())) == 0) {
    return Status::Ok();
  }
  const int err = errno;
  return InvalidArgument(fmt::format(
      "TCP congestion control '{}' refused: {} (this process may choose: {}; available: {})", name,
      std::strerror(err), ReadProcLine("/proc/sys/net/ipv4/tcp_allowed_congestion_control"),
      ReadProcLine("/proc/sys/net/ipv4/tcp_available_congestion_control")));
}

std::string CongestionControlOf(int fd) {
  char name[32] = {};
  socklen_t len = sizeof name;
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "";
  return std::string(name, strnlen(name, len));
}

}  // namespace pdserve::kv_transfer
