#include "tokenizer/stop_strings.h"

#include <gtest/gtest.h>

namespace pdserve::tokenizer {
namespace {

TEST(StopStringMatcherTest, HoldsBackAPossibleStartAndCutsAtTheStop) {
  StopStringMatcher m({"END", "\n\n"});
  EXPECT_EQ(m.Push("Hello E"), "Hello ");
  EXPECT_EQ(m.Push("N"), "");
  EXPECT_EQ(m.Push("D and more"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Push("ignored"), "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopStringMatcherTest, ReleasesHeldTextWhenItTurnsOutNotToBeAStop) {
  StopStringMatcher m({"END"});
  EXPECT_EQ(m.Push("the EN"), "the ");
  EXPECT_EQ(m.Push("TRY"), "ENTRY");
  EXPECT_EQ(m.Push(" E"), " ");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.Flush(), "E");
}

TEST(StopStringMatcherTest, EarliestStopWinsAndNoStopsPassesThrough) {
  StopStringMatcher m({"world", "lo"});
  EXPECT_EQ(m.Push("hello world"), "hel");
  StopStringMatcher none({});
  EXPECT_EQ(none.Push("anything"), "anything");
  EXPECT_EQ(none.Flush(), "");
}

}  // namespace
}  // namespace pdserve::tokenizer
