// Eventually: polls a condition every 10 ms until it holds or its bound passes, for tests that
// wait on another thread or process. Bounded, so a test that waits can still fail.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace pdserve::testing {

// Whether `done` held within `bound` (10 s by default).
inline bool Eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds bound = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + bound;
  while (true) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace pdserve::testing
