#include "grammar/token_vocabulary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace pdserve::grammar {
namespace {

TEST(TokenVocabularyTest, SortsTokensAndCountsSharedPrefixes) {
  TokenVocabulary v({"ab", "", "a", "b", "abc"});
  EXPECT_EQ(v.sorted(), (std::vector<int32_t>{2, 0, 4, 3}));  // a, ab, abc, b; "" left out
  EXPECT_EQ(v.shared_prefix(), (std::vector<int32_t>{0, 1, 2, 0}));
  EXPECT_EQ(v.longest(), 3u);
}

TEST(TokenMaskTest, AppliesToLogitsIncludingPaddingRows) {
  TokenMask mask;
  mask.Reset(70);
  mask.Allow(3);
  mask.Allow(64);
  EXPECT_EQ(mask.count(), 2);
  EXPECT_TRUE(mask.allowed(64));
  EXPECT_FALSE(mask.allowed(65));
  EXPECT_FALSE(mask.allowed(-1));
  std::vector<float> logits(72, 1.0f);  // two padding rows past the mask
  mask.Apply(logits);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (i == 3 || i == 64) {
      EXPECT_EQ(logits[i], 1.0f);
    } else {
      EXPECT_TRUE(std::isinf(logits[i]) && logits[i] < 0) << i;
    }
  }
}

}  // namespace
}  // namespace pdserve::grammar
