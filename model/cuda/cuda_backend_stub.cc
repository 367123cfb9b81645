// The CUDA backend's entry points in a build without CUDA (see cuda_backend.h): every device
// is absent and asking for one says why.
#include <string>

#include "model/cuda/cuda_backend.h"

namespace pdserve::model {
namespace {

Status NotBuilt() {
  return Unimplemented(
      "this pdserve was built without the CUDA backend (PDSERVE_CUDA=OFF, or no CUDA toolkit "
      "with nvcc at build time); use --device cpu");
}

}  // namespace

Result<std::unique_ptr<CudaBackend>> CreateCudaBackend(std::shared_ptr<const Weights>,
                                                       const ModelConfig&,
                                                       const CudaBackendOptions&) {
  return NotBuilt();
}

bool CudaBackendBuilt() { return false; }
Result<std::string> CudaDeviceUuid(int) { return NotBuilt(); }
int CudaDeviceCount() { return 0; }
Result<CudaPeaks> MeasureCudaPeaks(int) { return NotBuilt(); }

}  // namespace pdserve::model
