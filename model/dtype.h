// Element types of weights and KV (DType), with their sizes and scalar conversions to and from
// float. bf16 and f16 are stored as raw uint16_t bits. Pure functions: safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace pdserve::model {

enum class DType : uint8_t { kF32, kBF16, kF16 };

size_t DTypeSize(DType dtype);
std::string_view DTypeName(DType dtype);  // "f32", "bf16", "f16"
// Accepts our names, safetensors' ("F32", "BF16", "F16") and torch's ("float32", "bfloat16",
// "float16").
std::optional<DType> ParseDType(std::string_view name);

inline float BF16ToFloat(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest even, as PyTorch does; NaN stays NaN.
inline uint16_t FloatToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float F16ToFloat(uint16_t bits);
uint16_t FloatToF16(float f);

// Converts n elements of `dtype` at src into floats at dst.
void ConvertToFloat(DType dtype, const void* src, float* dst, size_t n);
// Converts n floats at src into `dtype` at dst (bf16 and f16 rounded to nearest even).
void ConvertFromFloat(const float* src, DType dtype, void* dst, size_t n);

}  // namespace pdserve::model
