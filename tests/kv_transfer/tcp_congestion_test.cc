#include "kv_transfer/tcp_congestion.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace pdserve::kv_transfer {
namespace {

std::string HostDefault() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_congestion_control");
  std::string name;
  std::getline(in, name);
  return name;
}

struct Socket {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ~Socket() { ::close(fd); }
};

TEST(TcpCongestionTest, ResolvesNames) {
  EXPECT_EQ(ResolveCongestionControl(""), "");
  EXPECT_EQ(ResolveCongestionControl("default"), "");
  EXPECT_EQ(ResolveCongestionControl("reno"), "reno");
  const std::string automatic = ResolveCongestionControl("auto");
  if (HostDefault() == "bbr") {
    EXPECT_TRUE(automatic == "cubic" || automatic == "reno") << automatic;
  } else {
    EXPECT_EQ(automatic, "");  // the host's own choice stands
  }
}

TEST(TcpCongestionTest, SetsRenoWhichEveryProcessMayChoose) {
  Socket s;
  ASSERT_GE(s.fd, 0);
  ASSERT_TRUE(SetCongestionControl(s.fd, "reno").ok());
  EXPECT_EQ(CongestionControlOf(s.fd), "reno");
}

TEST(TcpCongestionTest, DefaultLeavesTheSocketAlone) {
  Socket s;
  ASSERT_GE(s.fd, 0);
  const std::string before = CongestionControlOf(s.fd);
  ASSERT_TRUE(SetCongestionControl(s.fd, "default").ok());
  EXPECT_EQ(CongestionControlOf(s.fd), before);
  EXPECT_EQ(before, HostDefault());
}

TEST(TcpCongestionTest, AnUnknownAlgorithmIsAClearError) {
  Socket s;
  ASSERT_GE(s.fd, 0);
  const Status st = SetCongestionControl(s.fd, "no-such-cc");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'no-such-cc'"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("may choose"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace pdserve::kv_transfer
