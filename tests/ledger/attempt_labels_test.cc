// The ledger's labels (ledger/attempt_labels.h): each enum's text round-trips, the text is the
// ledger's column values, and unknown text is refused.
#include "ledger/attempt_labels.h"

#include <gtest/gtest.h>

namespace pdserve::gateway {
namespace {

TEST(AttemptLabelsTest, StatusesRoundTripAsTheLedgerSpellsThem) {
  const std::pair<AttemptStatus, const char*> all[] = {{AttemptStatus::kOk, "ok"},
                                                       {AttemptStatus::kCancelled, "cancelled"},
                                                       {AttemptStatus::kError, "error"},
                                                       {AttemptStatus::kRetried, "retried"},
                                                       {AttemptStatus::kResumed, "resumed"}};
  for (const auto& [status, text] : all) {
    EXPECT_EQ(ToString(status), text);
    auto parsed = ParseAttemptStatus(text);
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_EQ(*parsed, status);
  }
  EXPECT_FALSE(ParseAttemptStatus("OK").ok());
  EXPECT_FALSE(ParseAttemptStatus("").ok());
}

TEST(AttemptLabelsTest, CapacityClassesRoundTripAsTheLedgerSpellsThem) {
  const std::pair<CapacityClass, const char*> all[] = {{CapacityClass::kNone, ""},
                                                       {CapacityClass::kReserved, "reserved"},
                                                       {CapacityClass::kBurst, "burst"},
                                                       {CapacityClass::kApi, "api"}};
  for (const auto& [capacity_class, text] : all) {
    EXPECT_EQ(ToString(capacity_class), text);
    auto parsed = ParseCapacityClass(text);
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_EQ(*parsed, capacity_class);
  }
  auto spot = ParseCapacityClass("spot");
  ASSERT_FALSE(spot.ok());
  EXPECT_NE(spot.status().message().find("'spot'"), std::string::npos);
}

TEST(AttemptLabelsTest, OnlyOkAndCancelledAreAccepted) {
  EXPECT_TRUE(IsAcceptedStatus(AttemptStatus::kOk));
  EXPECT_TRUE(IsAcceptedStatus(AttemptStatus::kCancelled));
  EXPECT_FALSE(IsAcceptedStatus(AttemptStatus::kError));
  EXPECT_FALSE(IsAcceptedStatus(AttemptStatus::kRetried));
  EXPECT_FALSE(IsAcceptedStatus(AttemptStatus::kResumed));
}

}  // namespace
}  // namespace pdserve::gateway
