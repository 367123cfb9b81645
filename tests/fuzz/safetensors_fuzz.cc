// Fuzz target: safetensors files (model/safetensors.h), as a worker maps a model's weights. A file
// either opens with every tensor's bytes inside it, or is refused with an error naming it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tensors = pdserve::model::SafetensorsFile::ParseTensors(data, size, "model.safetensors");
  if (!tensors.ok()) {
    if (tensors.status().message().find("model.safetensors") == std::string::npos) abort();
    return 0;
  }
  for (const auto& [name, view] : *tensors) {
    const auto* begin = static_cast<const uint8_t*>(view.data);
    if (begin < data + 8 || view.bytes() > size || begin + view.bytes() > data + size) abort();
    // Touch the first and last byte, as a weight loader would read them.
    if (view.bytes() > 0) {
      volatile uint8_t first = begin[0], last = begin[view.bytes() - 1];
      (void)first;
      (void)last;
    }
    (void)view.ShapeString();
  }
  return 0;
}
