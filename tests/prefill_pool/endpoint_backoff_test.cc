#include "prefill_pool/endpoint_backoff.h"

#include <gtest/gtest.h>

namespace pdserve::prefill_pool {
namespace {

using namespace std::chrono_literals;
using Clock = EndpointBackoff::Clock;

TEST(EndpointBackoff, HoldsAFailedEndpointForItsHoldOnly) {
  EndpointBackoff b(3s);
  const Clock::time_point t0{};
  EXPECT_FALSE(b.FailedRecently("a:1", t0));
  b.Failed("a:1", t0);
  EXPECT_EQ(b.FailedRecently("a:1", t0 + 1s), t0);
  EXPECT_FALSE(b.FailedRecently("b:2", t0 + 1s));  // others are dialled as usual
  EXPECT_FALSE(b.FailedRecently("a:1", t0 + 3s));  // then it may be tried again
  b.Failed("a:1", t0 + 3s);                        // and fail again
  EXPECT_TRUE(b.FailedRecently("a:1", t0 + 4s));
  b.Succeeded("a:1");
  EXPECT_FALSE(b.FailedRecently("a:1", t0 + 4s));
}

TEST(EndpointBackoff, ForgetsEndpointsLongPast) {
  EndpointBackoff b(1s);
  const Clock::time_point t0{};
  b.Failed("old:1", t0);
  b.Failed("new:2", t0 + 20s);  // sweeps "old:1", whose hold ended long ago
  EXPECT_FALSE(b.FailedRecently("old:1", t0 + 20s));
  EXPECT_TRUE(b.FailedRecently("new:2", t0 + 20s));
}

}  // namespace
}  // namespace pdserve::prefill_pool
