// GpusPresent: how many NVIDIA GPUs this machine has, judged without CUDA or anything of
// pdserve's, so that a GPU test can skip where there is none and fail, never skip, where the
// product cannot use the one there is. A GPU is a device node /dev/nvidiaN; CUDA_VISIBLE_DEVICES,
// when set, caps the count; PDSERVE_EXPECT_GPUS=N (scripts/gpu-check sets it from nvidia-smi)
// says there are at least N whatever the nodes say. Safe before fork: touches no driver.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace pdserve::testing {

inline int GpusPresent() {
  int nodes = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.compare(0, 6, "nvidia") == 0 &&
        std::all_of(name.begin() + 6, name.end(),
                    [](unsigned char c) { return std::isdigit(c); })) {
      ++nodes;
    }
  }
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    const std::string v = visible;
    const int listed = v.empty() ? 0 : static_cast<int>(std::count(v.begin(), v.end(), ',')) + 1;
    nodes = std::min(nodes, listed);
  }
  const char* expected = std::getenv("PDSERVE_EXPECT_GPUS");
  return std::max(nodes, expected ? std::atoi(expected) : 0);
}

}  // namespace pdserve::testing
