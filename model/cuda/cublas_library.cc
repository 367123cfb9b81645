#include "model/cuda/cublas_library.h"

#include <dlfcn.h>

#include <string>

namespace pdserve::model::cuda {
namespace {

template <typename Fn>
bool Find(void* library, const char* symbol, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  return fn != nullptr;
}

Result<const CublasLibrary*> Open() {
  const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return Unavailable("cannot open " + name +
                       " (cuBLAS; put the CUDA toolkit's lib64 on LD_LIBRARY_PATH): " + dlerror());
  }
  static CublasLibrary lib;  // lives as long as the process, like the library (never closed)
  const bool found = Find(library, "cublasCreate_v2", lib.Create) &&
                     Find(library, "cublasDestroy_v2", lib.Destroy) &&
                     Find(library, "cublasSetStream_v2", lib.SetStream) &&
                     Find(library, "cublasSetWorkspace_v2", lib.SetWorkspace) &&
                     Find(library, "cublasGemmEx", lib.GemmEx) &&
                     Find(library, "cublasGetStatusName", lib.GetStatusName) &&
                     Find(library, "cublasGetStatusString", lib.GetStatusString);
  if (!found) return Unavailable(name + " lacks an entry point pdserve needs: " + dlerror());
  return &lib;
}

}  // namespace

Result<const CublasLibrary*> Cublas() {
  static const Result<const CublasLibrary*> library = Open();
  return library;
}

}  // namespace pdserve::model::cuda
