// Helpers for the kv_transfer tests: a host KV pool (memory plus KvPagePool) in a given layout,
// deterministic page contents, and a pipe for handing set-up data to a forked peer process.
#pragma once

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kv_transfer/kv_layout.h"
#include "kv_transfer/wire.h"
#include "model/kv_pool.h"

namespace pdserve::kv_transfer::testing {

inline KvLayout SmallLayout(int n_layers, model::DType dtype = model::DType::kF32,
                            int page_size = 2, std::string model_id = "test-model") {
  auto l = KvLayout::Make(std::move(model_id), dtype, n_layers, /*n_kv_heads=*/1,
                          /*head_dim=*/4, page_size);
  return *l;
}

struct HostKvPool {
  HostKvPool(const KvLayout& layout, int num_pages)
      : layout(layout), pool(num_pages), memory(layout.n_layers) {
    for (auto& m : memory) m.assign(layout.page_bytes() * num_pages, 0);
  }
  std::vector<void*> bases() {
    std::vector<void*> b;
    for (auto& m : memory) b.push_back(m.data());
    return b;
  }
  std::vector<const void*> const_bases() {
    std::vector<const void*> b;
    for (auto& m : memory) b.push_back(m.data());
    return b;
  }
  unsigned char* page(int layer, int32_t page_id) {
    return memory[layer].data() + layout.page_bytes() * page_id;
  }

  KvLayout layout;
  model::KvPagePool pool;
  std::vector<std::vector<unsigned char>> memory;  // [n_layers][num_pages * page_bytes]
};

// The bytes that block-table position `index` of `request` holds in `layer`.
inline void FillPage(unsigned char* dst, size_t n, uint64_t request, int layer, size_t index) {
  uint64_t x = request * 0x9E3779B97F4A7C15ull ^ (uint64_t(layer) << 40) ^ index;
  for (size_t i = 0; i < n; i += 8) {
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(dst + i, &z, std::min<size_t>(8, n - i));
  }
}

inline bool PageMatches(const unsigned char* p, size_t n, uint64_t request, int layer,
                        size_t index) {
  std::vector<unsigned char> want(n);
  FillPage(want.data(), n, request, layer, index);
  return std::memcmp(p, want.data(), n) == 0;
}

// A pipe of uint64 words with a deadline on every read.
class WordPipe {
 public:
  WordPipe() {
    if (::pipe(fds_) != 0) fds_[0] = fds_[1] = -1;
  }
  ~WordPipe() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  void Write(uint64_t w) {
    const char* p = reinterpret_cast<const char*>(&w);
    size_t left = sizeof w;
    while (left > 0) {
      ssize_t n = ::write(fds_[1], p, left);
      if (n <= 0) return;
      p += n, left -= n;
    }
  }
  // A reservation's transfer secret, as two words.
  void WriteSecret(const TransferSecret& s) {
    uint64_t w[2];
    std::memcpy(w, s.data(), sizeof w);
    Write(w[0]);
    Write(w[1]);
  }
  bool ReadSecret(TransferSecret* s) {
    uint64_t w[2];
    if (!Read(&w[0]) || !Read(&w[1])) return false;
    std::memcpy(s->data(), w, sizeof w);
    return true;
  }
  // False on timeout or EOF.
  bool Read(uint64_t* w, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    char* p = reinterpret_cast<char*>(w);
    size_t left = sizeof *w;
    while (left > 0) {
      pollfd pfd{fds_[0], POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(timeout.count())) <= 0) return false;
      ssize_t n = ::read(fds_[0], p, left);
      if (n <= 0) return false;
      p += n, left -= n;
    }
    return true;
  }

 private:
  int fds_[2];
};

// Waits for a child, at most `timeout`; kills it past that. Returns its exit code, or -1.
inline int WaitChild(pid_t pid, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    ::usleep(5000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

}  // namespace pdserve::kv_transfer::testing
