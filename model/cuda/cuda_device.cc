#include <charconv>
#include <span>
#include <string>

#include "model/cuda/cuda_backend.h"

namespace pdserve::model {

Result<int> ParseCudaDevice(std::string_view device) {
  if (device == "cuda") return 0;
  constexpr std::string_view kPrefix = "cuda:";
  int index = -1;
  if (device.substr(0, kPrefix.size()) == kPrefix && device.size() > kPrefix.size()) {
    const char* begin = device.data() + kPrefix.size();
    const char* end = device.data() + device.size();
    const auto [ptr, ec] = std::from_chars(begin, end, index);
    if (ec == std::errc() && ptr == end && index >= 0) return index;
  }
  return InvalidArgument("device '" + std::string(device) + "' is neither cpu nor cuda:N");
}

std::string FormatGpuUuid(std::span<const unsigned char, 16> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "GPU-";
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 0xf];
  }
  return out;
}

}  // namespace pdserve::model
