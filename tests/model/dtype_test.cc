#include "model/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace pdserve::model {
namespace {

// ConvertFromFloat rounds each element as the scalar conversions do, and ConvertToFloat reads it
// back: exact for f32, and for values the narrow types hold.
TEST(DTypeTest, ConvertFromFloatMatchesTheScalarConversionsAndRoundTrips) {
  const std::vector<float> values = {0.0f, -1.0f, 0.5f, 3.14159265f, 1e-3f, -65504.0f, 1.0f / 3};
  const size_t n = values.size();
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    std::vector<uint8_t> packed(n * DTypeSize(dtype));
    ConvertFromFloat(values.data(), dtype, packed.data(), n);
    std::vector<float> back(n);
    ConvertToFloat(dtype, packed.data(), back.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const auto* bits = reinterpret_cast<const uint16_t*>(packed.data());
      switch (dtype) {
        case DType::kF32:
          EXPECT_EQ(back[i], values[i]);
          break;
        case DType::kBF16:
          EXPECT_EQ(bits[i], FloatToBF16(values[i])) << i;
          EXPECT_EQ(back[i], BF16ToFloat(FloatToBF16(values[i]))) << i;
          EXPECT_NEAR(back[i], values[i], std::fabs(values[i]) / 128) << i;
          break;
        case DType::kF16:
          EXPECT_EQ(bits[i], FloatToF16(values[i])) << i;
          EXPECT_NEAR(back[i], values[i], std::fabs(values[i]) / 1024 + 1e-7) << i;
          break;
      }
    }
  }
}

}  // namespace
}  // namespace pdserve::model
