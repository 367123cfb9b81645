// CudaBackend: the engine's Backend on one NVIDIA GPU (`--device cuda:N`). Weights live on the
// device in bf16 (f32 and f16 files are converted while uploading; the host copy is not kept);
// the KV pages are bf16 in device memory with the CPU pool's layout (KvCacheShape, dtype bf16:
// per layer [num_pages][2][page_size][n_kv_heads][head_dim]), so KvLayerData hands KV transports
// device pointers. The residual stream and every accumulation are f32; the matrix products are
// cuBLAS (bf16 in, f32 compute) except for decode-sized steps, which run a weight-streaming GEMV
// kernel; RMSNorm, RoPE (with Llama-3 scaling), q/k/v biases, SwiGLU, the KV write and paged
// attention (prompt chunks over earlier context, and split-K decode) are kernels in this folder.
// The maths is CpuBackend's, so logits agree within bf16 rounding; the CUDA backend is not
// batch-invariant bit for bit (cuBLAS picks kernels by shape).
//
// Sampling: the Engine samples on the host from Forward's logits (its Sampler owns each
// request's seeded random stream, which a prefill/decode pair must share). When every row of a
// step is greedy the Engine calls ForwardGreedy instead: the argmax is taken on the device and
// only token ids cross PCIe (lowest id among equal maxima, as Sampler).
//
// Threads: like every Backend, driven by one thread. All work runs on one stream of the
// backend's device and each call selects the device first, so the driving thread may differ
// from the creating one. Forward returns with the stream idle; after_layer_kv runs after a
// stream synchronisation, so a transport may read that layer's pages from another stream.
//
// Builds without CUDA (PDSERVE_CUDA=OFF, or no toolkit with nvcc) answer Unimplemented.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/backend.h"
#include "model/backend_factory.h"
#include "model/weights.h"

namespace pdserve::model {

struct CudaBackendOptions {
  int device = 0;        // CUDA device index; must exist
  int num_pages = 1024;  // KV pages in the pool; must be >= 1
  int page_size = 16;    // tokens per KV page; must be >= 1
  // Steps of at most this many rows use the GEMV kernel instead of cuBLAS (0..8; 0: cuBLAS
  // always). Default 4: beyond that the rows' re-reads of x cost more than cuBLAS loses.
  int gemv_max_rows = 4;
  // Decode-only steps run the decode attention kernel where it applies (kernels.h,
  // DecodeAttentionApplies); false: the general kernel, as prompt steps. Tests run both.
  bool decode_attention_kernel = true;
  // Benchmarks only: with no weights, random bf16 weights of the config's shape are made on the
  // device from this seed (no file, no host memory).
  std::optional<uint64_t> random_weights_seed;
};

class CudaBackend : public Backend {
 public:
  // The argmax is taken on the device.
  bool greedy_on_device() const override { return true; }
  Status ForwardGreedy(const ForwardBatch& batch, std::vector<int32_t>* tokens) override = 0;
  // The device's name ("NVIDIA H200").
  virtual std::string device_name() const = 0;
};

// `weights` may be null only with random_weights_seed. Refuses a device that does not exist,
// head_dim odd or above 256, and n_heads not a multiple of n_kv_heads.
Result<std::unique_ptr<CudaBackend>> CreateCudaBackend(std::shared_ptr<const Weights> weights,
                                                       const ModelConfig& config,
                                                       const CudaBackendOptions& options);

// CUDA devices present: 0 without the CUDA backend, a driver or a device.
int CudaDeviceCount();

// Device `device`'s UUID as nvidia-smi and Kubernetes' device plugin print it ("GPU-" then
// 8-4-4-4-12 hex digits): what tells one GPU from another across processes and containers.
Result<std::string> CudaDeviceUuid(int device);
// The 16 bytes of a UUID in that form (always built; CudaDeviceUuid's formatting).
std::string FormatGpuUuid(std::span<const unsigned char, 16> bytes);

// The rates `pdserve bench engine --device cuda:N` compares against, measured now.
struct CudaPeaks {
  std::string device_name;
  // cudaMemcpy device to device of a buffer far larger than L2, counting bytes read plus bytes
  // written (STREAM's convention): the HBM bandwidth a weight-streaming decode can hope for.
  double copy_gbps = 0;
  // A large cuBLAS bf16 GEMM (8192^3, f32 compute): the matrix rate prefill can hope for.
  double bf16_tflops = 0;
};
Result<CudaPeaks> MeasureCudaPeaks(int device);

}  // namespace pdserve::model
