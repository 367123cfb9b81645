#include "model/dtype.h"

#include <immintrin.h>

namespace pdserve::model {

size_t DTypeSize(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  if (name == "f32" || name == "F32" || name == "float32" || name == "float") return DType::kF32;
  if (name == "bf16" || name == "BF16" || name == "bfloat16") return DType::kBF16;
  if (name == "f16" || name == "F16" || name == "float16" || name == "half") return DType::kF16;
  return std::nullopt;
}

// F16C does the IEEE half conversions in hardware (part of x86-64-v3).
float F16ToFloat(uint16_t bits) { return _cvtsh_ss(bits); }
uint16_t FloatToF16(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }

void ConvertToFloat(DType dtype, const void* src, float* dst, size_t n) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = BF16ToFloat(s[i]);
      return;
    }
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = F16ToFloat(s[i]);
      return;
    }
  }
}

void ConvertFromFloat(const float* src, DType dtype, void* dst, size_t n) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = FloatToBF16(src[i]);
      return;
    }
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = FloatToF16(src[i]);
      return;
    }
  }
}

}  // namespace pdserve::model
