// PayloadSplicer over a real loopback TCP connection: bytes arrive in order and intact across a
// full socket (huge pages and plain, page-aligned or not), memory the kernel will not lend is
// refused with nothing sent, and a lost peer is an error, not a SIGPIPE.
#include "kv_transfer/payload_splicer.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "model/huge_pages.h"

namespace pdserve::kv_transfer {
namespace {

// A connected loopback pair; the sending end is non-blocking, as TcpTransport's is.
struct LoopbackSockets {
  LoopbackSockets() {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listener, 1), 0);
    EXPECT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
    sender = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(sender, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    receiver = ::accept(listener, nullptr, nullptr);
    ::close(listener);
    ::fcntl(sender, F_SETFL, ::fcntl(sender, F_GETFL) | O_NONBLOCK);
  }
  ~LoopbackSockets() {
    if (sender >= 0) ::close(sender);
    if (receiver >= 0) ::close(receiver);
  }
  int sender = -1;
  int receiver = -1;
};

bool WaitWritable(int fd) {
  pollfd p{fd, POLLOUT, 0};
  return ::poll(&p, 1, 10000) == 1;
}

void FillRandom(unsigned char* p, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(rng());
}

// Sends n bytes at `data` through a splicer, the first call with no reader (so the socket
// fills), then with one; returns what the reader got.
std::vector<unsigned char> SendThrough(const unsigned char* data, size_t n) {
  LoopbackSockets s;
  auto splicer = PayloadSplicer::Make();
  EXPECT_TRUE(splicer.ok()) << splicer.status().ToString();
  if (!splicer.ok()) return {};
  auto first = splicer->Send(s.sender, data, n);
  EXPECT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_LT(*first, n) << "a socket with no reader should fill before " << n << " bytes";

  std::vector<unsigned char> got(n);
  std::thread reader([&] {
    for (size_t done = 0; done < n;) {
      const ssize_t k = ::recv(s.receiver, got.data() + done, n - done, 0);
      if (k <= 0) return;
      done += static_cast<size_t>(k);
    }
  });
  for (size_t done = *first; done < n;) {
    if (!WaitWritable(s.sender)) break;
    auto sent = splicer->Send(s.sender, data + done, n - done);
    EXPECT_TRUE(sent.ok()) << sent.status().ToString();
    if (!sent.ok()) break;
    done += *sent;
  }
  EXPECT_EQ(splicer->in_pipe(), 0u);
  reader.join();
  return got;
}

TEST(PayloadSplicer, HugePageBytesArriveInOrderAcrossAFullSocket) {
  const size_t n = 24u << 20;
  auto memory = model::AllocateHugePageBuffer(n);
  auto* data = static_cast<unsigned char*>(memory.get());
  FillRandom(data, n, 1);
  const std::vector<unsigned char> got = SendThrough(data, n);
  ASSERT_EQ(got.size(), n);
  EXPECT_EQ(std::memcmp(got.data(), data, n), 0);
}

TEST(PayloadSplicer, UnalignedBytesInSmallPagesArriveInOrder) {
  std::vector<unsigned char> memory((12u << 20) + 4096);
  unsigned char* data = memory.data() + 1234;  // starts and ends inside a page
  const size_t n = (12u << 20) + 77;
  FillRandom(data, n, 2);
  const std::vector<unsigned char> got = SendThrough(data, n);
  ASSERT_EQ(got.size(), n);
  EXPECT_EQ(std::memcmp(got.data(), data, n), 0);
}

TEST(PayloadSplicer, MemoryTheKernelWillNotLendIsRefusedWithNothingSent) {
  LoopbackSockets s;
  auto splicer = PayloadSplicer::Make();
  ASSERT_TRUE(splicer.ok());
  void* no_access = ::mmap(nullptr, 1 << 16, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(no_access, MAP_FAILED);
  auto sent = splicer->Send(s.sender, no_access, 1 << 16);
  EXPECT_EQ(sent.status().code(), StatusCode::kFailedPrecondition) << sent.status().ToString();
  EXPECT_EQ(splicer->in_pipe(), 0u);
  ::munmap(no_access, 1 << 16);
  // The splicer still works for memory it can lend.
  std::vector<unsigned char> fine(4096, 7);
  auto ok = splicer->Send(s.sender, fine.data(), fine.size());
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, fine.size());
}

TEST(PayloadSplicer, ALostPeerIsAnErrorNotASigpipe) {
  struct sigaction old_action {};
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;  // SIGPIPE would end this test process
  sigaction(SIGPIPE, &default_action, &old_action);

  LoopbackSockets s;
  auto splicer = PayloadSplicer::Make();
  ASSERT_TRUE(splicer.ok());
  ::close(s.receiver);
  s.receiver = -1;
  std::vector<unsigned char> data(1 << 20, 3);
  Status error;
  for (int attempt = 0; attempt < 200 && error.ok(); ++attempt) {
    auto sent = splicer->Send(s.sender, data.data(), data.size());
    if (!sent.ok()) error = sent.status();
    if (sent.ok() && *sent < data.size()) WaitWritable(s.sender);
  }
  EXPECT_EQ(error.code(), StatusCode::kUnavailable) << error.ToString();
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0) << "the SIGPIPE was left pending";
  sigaction(SIGPIPE, &old_action, nullptr);
}

}  // namespace
}  // namespace pdserve::kv_transfer
