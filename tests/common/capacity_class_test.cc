// Capacity classes (common/capacity_class.h): each one's text round-trips, unknown text is
// refused, and a worker registers only as reserved or burst.
#include "common/capacity_class.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace pdserve {
namespace {

TEST(CapacityClassTest, RoundTripsAsTheLedgerAndTheWireSpellIt) {
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

TEST(CapacityClassTest, AWorkerIsReservedOrBurst) {
  EXPECT_EQ(*ParseWorkerCapacityClass("reserved"), CapacityClass::kReserved);
  EXPECT_EQ(*ParseWorkerCapacityClass("burst"), CapacityClass::kBurst);
  for (const char* text : {"api", "", "spot", "Burst"}) {
    auto parsed = ParseWorkerCapacityClass(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.status().message().find("must be reserved or burst"), std::string::npos);
  }
}

}  // namespace
}  // namespace pdserve
