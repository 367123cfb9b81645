// The ledger's attempt statuses (ledger/attempt_labels.h): each one's text round-trips, the text
// is the ledger's column values, and unknown text is refused.
#include "ledger/attempt_labels.h"

#include <gtest/gtest.h>

namespace pdserve::ledger {
namespace {

TEST(AttemptLabelsTest, StatusesRoundTripAsTheLedgerSpellsThem) {
  const std::pair<AttemptStatus, const char*> all[] = {
      {AttemptStatus::kOk, "ok"},           {AttemptStatus::kCancelled, "cancelled"},
      {AttemptStatus::kError, "error"},     {AttemptStatus::kRetried, "retried"},
      {AttemptStatus::kResumed, "resumed"}, {AttemptStatus::kRefused, "refused"}};
  for (const auto& [status, text] : all) {
    EXPECT_EQ(ToString(status), text);
    auto parsed = ParseAttemptStatus(text);
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_EQ(*parsed, status);
  }
  EXPECT_FALSE(ParseAttemptStatus("OK").ok());
  EXPECT_FALSE(ParseAttemptStatus("").ok());
}

TEST(AttemptLabelsTest, OnlyOkAndCancelledAreAccepted) {
  EXPECT_TRUE(IsAcceptedStatus(AttemptStatus::kOk));
  EXPECT_TRUE(IsAcceptedStatus(AttemptStatus::kCancelled));
  EXPECT_FALSE(IsAcceptedStatus(AttemptStatus::kError));
  EXPECT_FALSE(IsAcceptedStatus(AttemptStatus::kRetried));
  EXPECT_FALSE(IsAcceptedStatus(AttemptStatus::kResumed));
  EXPECT_FALSE(IsAcceptedStatus(AttemptStatus::kRefused));
}

}  // namespace
}  // namespace pdserve::ledger
