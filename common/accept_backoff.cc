#include "common/accept_backoff.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace pdserve {

AcceptBackoff::AcceptBackoff(boost::asio::any_io_executor executor, std::string what)
    : timer_(std::move(executor)), what_(std::move(what)) {}

std::chrono::milliseconds AcceptBackoff::DelayAfter(int failures) {
  const int doublings = std::clamp(failures - 1, 0, 7);  // 10 ms .. 1.28 s, capped at 1 s
  return std::min(std::chrono::milliseconds(10 << doublings), std::chrono::milliseconds(1000));
}

void AcceptBackoff::Next(const boost::system::error_code& ec, std::function<void()> again) {
  if (!ec) {
    failures_ = 0;
    return again();
  }
  ++failures_;
  ++unlogged_;
  const auto now = std::chrono::steady_clock::now();
  if (failures_ == 1 || now - last_log_ >= std::chrono::seconds(10)) {
    spdlog::warn("{}: accept failed {} time(s) ({}); waiting {} ms before accepting again", what_,
                 unlogged_, ec.message(), DelayAfter(failures_).count());
    unlogged_ = 0;
    last_log_ = now;
  }
  timer_.expires_after(DelayAfter(failures_));
  timer_.async_wait([again = std::move(again)](const boost::system::error_code& waited) {
    if (!waited) again();
  });
}

void AcceptBackoff::Cancel() { timer_.cancel(); }

}  // namespace pdserve
