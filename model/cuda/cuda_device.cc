#include <charconv>
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

}  // namespace pdserve::model
