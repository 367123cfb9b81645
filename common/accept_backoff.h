// AcceptBackoff: what an accept loop does when accept fails (out of file descriptors, out of
// memory: the pending connection stays queued, so accepting again at once fails again and spins
// a core). It waits before the next accept, from 10 ms doubling to 1 s while accept keeps
// failing, and logs the first failure of a run and then at most every 10 s, with how many there
// were; a success resets it. Used by every listener (gateway HTTP and control ports, KV and
// metrics listeners). One per acceptor; Next is called from its accept handler only, which is
// never concurrent with itself.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace pdserve {

class AcceptBackoff {
 public:
  // `what` names the listener in the log ("the KV listener").
  AcceptBackoff(boost::asio::any_io_executor executor, std::string what);

  // After an accept completed with `ec` (not operation_aborted): `again` runs at once after a
  // success, later after a failure.
  void Next(const boost::system::error_code& ec, std::function<void()> again);
  // Drops a pending `again` (the listener is closing).
  void Cancel();

  // The delay after the `failures`-th failure in a row (1 and up).
  static std::chrono::milliseconds DelayAfter(int failures);

 private:
  boost::asio::steady_timer timer_;
  const std::string what_;
  int failures_ = 0;      // in a row
  int64_t unlogged_ = 0;  // failures since the last log line
  std::chrono::steady_clock::time_point last_log_;
};

}  // namespace pdserve
