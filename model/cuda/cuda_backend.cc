#include "model/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "model/cuda/cublas_library.h"
#include "model/cuda/cuda_check.h"
#include "model/cuda/device_memory.h"
#include "model/cuda/kernels.h"
#include "model/cuda/step_plan.h"

namespace pdserve::model {
namespace cuda {
namespace {

// cuBLAS's recommended workspace on Hopper; also lets it run without allocating mid-step.
constexpr size_t kCublasWorkspaceBytes = 32u << 20;

// One layer's weights on the device.
struct DeviceLayer {
  DeviceBuffer wqkv;       // bf16 [q_dim + 2 kv_dim][dim]: q, k and v projections stacked
  DeviceBuffer wo;         // bf16 [dim][q_dim]
  DeviceBuffer w_gate_up;  // bf16 [2 hidden_dim][dim]: gate rows, then up rows
  DeviceBuffer w_down;     // bf16 [dim][hidden_dim]
  DeviceBuffer attn_norm;  // f32 [dim]
  DeviceBuffer mlp_norm;   // f32 [dim]
  DeviceBuffer bqkv;       // f32 [q_dim + 2 kv_dim]; empty unless attention_bias
  DeviceBuffer q_norm;     // f32 [head_dim]; empty unless qk_norm
  DeviceBuffer k_norm;     // f32 [head_dim]; empty unless qk_norm
};

// n elements of `dtype` at src as bf16 bits.
void ConvertToBf16(DType dtype, const void* src, uint16_t* dst, size_t n) {
  if (dtype == DType::kF32) {
    const float* s = static_cast<const float*>(src);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) dst[i] = FloatToBF16(s[i]);
  } else if (dtype == DType::kF16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) dst[i] = FloatToBF16(F16ToFloat(s[i]));
  } else {
    std::memcpy(dst, src, n * sizeof(uint16_t));
  }
}

// Copies `m` as bf16 to dst (device), converting on the host in slices.
Status UploadMatrix(const Matrix& m, bf16* dst, std::vector<uint16_t>& staging) {
  const size_t n = static_cast<size_t>(m.rows) * m.cols;
  if (m.dtype == DType::kBF16) {
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, m.data, n * 2, cudaMemcpyHostToDevice));
    return Status::Ok();
  }
  constexpr size_t kSlice = 16u << 20;
  staging.resize(std::min(n, kSlice));
  const auto* src = static_cast<const uint8_t*>(m.data);
  for (size_t begin = 0; begin < n; begin += kSlice) {
    const size_t count = std::min(kSlice, n - begin);
    ConvertToBf16(m.dtype, src + begin * DTypeSize(m.dtype), staging.data(), count);
    PDSERVE_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(dst + begin, staging.data(), count * 2, cudaMemcpyHostToDevice));
  }
  return Status::Ok();
}

template <typename T>
Status UploadVector(const std::vector<T>& v, DeviceBuffer& dst) {
  PDSERVE_RETURN_IF_ERROR(dst.Reserve(v.size() * sizeof(T)));
  PDSERVE_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(dst.get<T>(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return Status::Ok();
}

// Matrices [rows][cols] stacked along rows into one bf16 device buffer.
Status UploadStacked(std::initializer_list<const Matrix*> parts, DeviceBuffer& dst,
                     std::vector<uint16_t>& staging) {
  size_t total = 0;
  for (const Matrix* m : parts) total += static_cast<size_t>(m->rows) * m->cols;
  PDSERVE_RETURN_IF_ERROR(dst.Reserve(total * 2));
  size_t offset = 0;
  for (const Matrix* m : parts) {
    PDSERVE_RETURN_IF_ERROR(UploadMatrix(*m, dst.get<bf16>() + offset, staging));
    offset += static_cast<size_t>(m->rows) * m->cols;
  }
  return Status::Ok();
}

std::vector<float> Concat(std::initializer_list<const std::vector<float>*> parts) {
  std::vector<float> out;
  for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

enum class Out { kF32, kBf16 };

class CudaBackendImpl final : public CudaBackend {
 public:
  CudaBackendImpl(const ModelConfig& config, const CudaBackendOptions& options)
      : config_(config), options_(options), tiling_(TileHeads(config)) {
    shape_.n_layers = config.n_layers;
    shape_.num_pages = options.num_pages;
    shape_.page_size = options.page_size;
    shape_.n_kv_heads = config.n_kv_heads;
    shape_.head_dim = config.head_dim;
    shape_.dtype = DType::kBF16;
  }
  ~CudaBackendImpl() override;

  Status Init(const Weights* weights);

  const ModelConfig& config() const override { return config_; }
  const KvCacheShape& kv_shape() const override { return shape_; }
  std::string device() const override { return "cuda:" + std::to_string(options_.device); }
  std::string device_name() const override { return device_name_; }
  void* KvLayerData(int layer) override {
    return kv_.get<bf16>() + static_cast<size_t>(layer) * shape_.layer_elems();
  }

  Status Forward(const ForwardBatch& batch, std::vector<float>* logits) override;
  Status ForwardGreedy(const ForwardBatch& batch, std::vector<int32_t>* tokens) override;

 private:
  Status UploadWeights(const Weights& w);
  Status MakeRandomWeights(uint64_t seed);
  // Runs the step up to the logits, which stay on the device in logits_.
  Status Run(const ForwardBatch& batch);
  Status ReserveRunBuffers();
  Status UploadPlan();
  // y[rows][n] (+)= x[rows][k] · w[n][k]^T; bf16 in, f32 accumulation.
  Status Matmul(const bf16* x, int rows, int k, const DeviceBuffer& w, int n, void* y, Out out,
                bool accumulate);
  // Waits for the stream; the first error wins.
  Status Finish(Status status);

  ModelConfig config_;
  CudaBackendOptions options_;
  HeadTiling tiling_;
  KvCacheShape shape_;
  std::string device_name_;
  StepPlanOptions plan_options_;
  const CublasLibrary* blas_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;

  DeviceBuffer embed_;    // bf16 [vocab][dim]
  DeviceBuffer lm_head_;  // bf16 [vocab][dim]; empty when tied to embed_
  std::vector<DeviceLayer> layers_;
  DeviceBuffer final_norm_;  // f32 [dim]
  DeviceBuffer inv_freq_;    // f64 [head_dim / 2]
  DeviceBuffer kv_;          // bf16, n_layers pools of KvCacheShape layout, one after another
  DeviceBuffer cublas_workspace_;

  // Per-step buffers; they grow to the largest step seen and stay.
  StepPlan plan_;
  PinnedBuffer plan_host_;
  DeviceBuffer plan_device_;
  const int32_t* tokens_ = nullptr;  // the plan's arrays inside plan_device_
  const int32_t* positions_ = nullptr;
  const int32_t* row_table_ = nullptr;
  const int32_t* tables_ = nullptr;
  const int32_t* logit_rows_ = nullptr;
  const AttentionItem* items_ = nullptr;
  const AttentionCombine* combine_ = nullptr;
  DeviceBuffer x_;                    // f32 [rows][dim]: the residual stream
  DeviceBuffer xn_;                   // bf16 [rows][dim]: normed input of the next matrix product
  DeviceBuffer qkv_;                  // f32 [rows][q_dim + 2 kv_dim]
  DeviceBuffer q_;                    // f32 [rows][q_dim], rotated
  DeviceBuffer att_;                  // bf16 [rows][q_dim]
  DeviceBuffer gate_up_;              // bf16 [rows][2 hidden_dim]
  DeviceBuffer act_;                  // bf16 [rows][hidden_dim]
  DeviceBuffer rope_cos_, rope_sin_;  // f32 [rows][head_dim / 2]
  DeviceBuffer partial_o_, partial_ml_;  // split attention tiles (kernels.h)
  DeviceBuffer split_counters_;          // i32, zero between steps (AttentionArgs)
  DeviceBuffer logits_;                  // f32 [logit rows][vocab]
  DeviceBuffer argmax_;                  // i32 [logit rows]
  PinnedBuffer tokens_host_;             // i32 [logit rows]
};

CudaBackendImpl::~CudaBackendImpl() {
  cudaSetDevice(options_.device);
  if (stream_) cudaStreamSynchronize(stream_);
  if (cublas_) blas_->Destroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

Status CudaBackendImpl::Init(const Weights* weights) {
  const ModelConfig& c = config_;
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  cudaDeviceProp props;
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, options_.device));
  device_name_ = props.name;
  plan_options_.target_blocks = 4 * props.multiProcessorCount;
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  PDSERVE_ASSIGN_OR_RETURN(blas_, Cublas());
  PDSERVE_CUBLAS_RETURN_IF_ERROR(blas_->Create(&cublas_));
  PDSERVE_CUBLAS_RETURN_IF_ERROR(blas_->SetStream(cublas_, stream_));
  PDSERVE_RETURN_IF_ERROR(cublas_workspace_.Reserve(kCublasWorkspaceBytes));
  PDSERVE_CUBLAS_RETURN_IF_ERROR(
      blas_->SetWorkspace(cublas_, cublas_workspace_.get<void>(), kCublasWorkspaceBytes));

  PDSERVE_RETURN_IF_ERROR(weights ? UploadWeights(*weights)
                                  : MakeRandomWeights(*options_.random_weights_seed));
  PDSERVE_RETURN_IF_ERROR(UploadVector(c.RopeInverseFrequencies(), inv_freq_));
  // cudaMemcpy from pageable memory may return before its DMA lands, on the legacy stream that
  // stream_ (non-blocking) does not wait for: the weights must be there before any kernel.
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  const size_t kv_bytes = shape_.layer_bytes() * c.n_layers;
  PDSERVE_RETURN_IF_ERROR(kv_.Reserve(kv_bytes));
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(kv_.get<void>(), 0, kv_bytes, stream_));
  return Finish(Status::Ok());
}

Status CudaBackendImpl::UploadWeights(const Weights& w) {
  const ModelConfig& c = config_;
  std::vector<uint16_t> staging;
  PDSERVE_RETURN_IF_ERROR(UploadStacked({&w.embed}, embed_, staging));
  if (w.lm_head.data != w.embed.data) {
    PDSERVE_RETURN_IF_ERROR(UploadStacked({&w.lm_head}, lm_head_, staging));
  }
  PDSERVE_RETURN_IF_ERROR(UploadVector(w.final_norm, final_norm_));
  layers_.resize(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) {
    const LayerWeights& src = w.layers[i];
    DeviceLayer& dst = layers_[i];
    PDSERVE_RETURN_IF_ERROR(UploadStacked({&src.wq, &src.wk, &src.wv}, dst.wqkv, staging));
    PDSERVE_RETURN_IF_ERROR(UploadStacked({&src.wo}, dst.wo, staging));
    PDSERVE_RETURN_IF_ERROR(UploadStacked({&src.w_gate, &src.w_up}, dst.w_gate_up, staging));
    PDSERVE_RETURN_IF_ERROR(UploadStacked({&src.w_down}, dst.w_down, staging));
    PDSERVE_RETURN_IF_ERROR(UploadVector(src.attn_norm, dst.attn_norm));
    PDSERVE_RETURN_IF_ERROR(UploadVector(src.mlp_norm, dst.mlp_norm));
    if (c.attention_bias) {
      PDSERVE_RETURN_IF_ERROR(UploadVector(Concat({&src.bq, &src.bk, &src.bv}), dst.bqkv));
    }
    if (c.qk_norm) {
      PDSERVE_RETURN_IF_ERROR(UploadVector(src.q_norm, dst.q_norm));
      PDSERVE_RETURN_IF_ERROR(UploadVector(src.k_norm, dst.k_norm));
    }
  }
  return Status::Ok();
}

// Scales as model_maker's random models: activations stay of order one through the layers.
Status CudaBackendImpl::MakeRandomWeights(uint64_t seed) {
  const ModelConfig& c = config_;
  uint64_t stream_id = seed * 1000003u;
  auto fill = [&](DeviceBuffer& buf, size_t n, float mean, float stddev, bool bf16_values) {
    const size_t bytes = n * (bf16_values ? 2 : 4);
    PDSERVE_RETURN_IF_ERROR(buf.Reserve(bytes));
    ++stream_id;
    PDSERVE_CUDA_RETURN_IF_ERROR(
        bf16_values ? LaunchFillNormal(buf.get<bf16>(), n, stream_id, mean, stddev, stream_)
                    : LaunchFillNormal(buf.get<float>(), n, stream_id, mean, stddev, stream_));
    return Status::Ok();
  };
  const float in_std = 1.0f / std::sqrt(static_cast<float>(c.dim));
  const float hidden_std = 1.0f / std::sqrt(static_cast<float>(c.hidden_dim));
  const float q_std = 1.0f / std::sqrt(static_cast<float>(c.q_dim()));
  const size_t dim = c.dim, qkv = c.q_dim() + 2 * c.kv_dim(), hidden = c.hidden_dim;
  const size_t vocab = c.vocab_size;
  PDSERVE_RETURN_IF_ERROR(fill(embed_, vocab * dim, 0, 1, true));
  if (!c.tie_word_embeddings) PDSERVE_RETURN_IF_ERROR(fill(lm_head_, vocab * dim, 0, in_std, true));
  PDSERVE_RETURN_IF_ERROR(fill(final_norm_, dim, 1, 0.1f, false));
  layers_.resize(c.n_layers);
  for (DeviceLayer& l : layers_) {
    PDSERVE_RETURN_IF_ERROR(fill(l.wqkv, qkv * dim, 0, in_std, true));
    PDSERVE_RETURN_IF_ERROR(fill(l.wo, dim * c.q_dim(), 0, q_std, true));
    PDSERVE_RETURN_IF_ERROR(fill(l.w_gate_up, 2 * hidden * dim, 0, in_std, true));
    PDSERVE_RETURN_IF_ERROR(fill(l.w_down, dim * hidden, 0, hidden_std, true));
    PDSERVE_RETURN_IF_ERROR(fill(l.attn_norm, dim, 1, 0.1f, false));
    PDSERVE_RETURN_IF_ERROR(fill(l.mlp_norm, dim, 1, 0.1f, false));
    if (c.attention_bias) PDSERVE_RETURN_IF_ERROR(fill(l.bqkv, qkv, 0, 0.1f, false));
    if (c.qk_norm) {
      PDSERVE_RETURN_IF_ERROR(fill(l.q_norm, c.head_dim, 1, 0.1f, false));
      PDSERVE_RETURN_IF_ERROR(fill(l.k_norm, c.head_dim, 1, 0.1f, false));
    }
  }
  return Status::Ok();
}

Status CudaBackendImpl::Finish(Status status) {
  const cudaError_t sync = cudaStreamSynchronize(stream_);
  if (!status.ok()) return status;
  PDSERVE_CUDA_RETURN_IF_ERROR(sync);
  return Status::Ok();
}

Status CudaBackendImpl::ReserveRunBuffers() {
  const ModelConfig& c = config_;
  const size_t t = plan_.num_rows, m = plan_.logit_rows.size();
  const size_t qkv = c.q_dim() + 2 * c.kv_dim(), half = c.head_dim / 2;
  PDSERVE_RETURN_IF_ERROR(x_.Reserve(t * c.dim * 4));
  PDSERVE_RETURN_IF_ERROR(xn_.Reserve(t * c.dim * 2));
  PDSERVE_RETURN_IF_ERROR(qkv_.Reserve(t * qkv * 4));
  PDSERVE_RETURN_IF_ERROR(q_.Reserve(t * c.q_dim() * 4));
  PDSERVE_RETURN_IF_ERROR(att_.Reserve(t * c.q_dim() * 2));
  PDSERVE_RETURN_IF_ERROR(gate_up_.Reserve(t * 2 * c.hidden_dim * 2));
  PDSERVE_RETURN_IF_ERROR(act_.Reserve(t * c.hidden_dim * 2));
  PDSERVE_RETURN_IF_ERROR(rope_cos_.Reserve(t * half * 4));
  PDSERVE_RETURN_IF_ERROR(rope_sin_.Reserve(t * half * 4));
  const size_t partial_rows =
      static_cast<size_t>(plan_.num_partials) * tiling_.grid_y() * tiling_.max_rows;
  PDSERVE_RETURN_IF_ERROR(partial_o_.Reserve(partial_rows * c.head_dim * 4));
  PDSERVE_RETURN_IF_ERROR(partial_ml_.Reserve(partial_rows * 2 * 4));
  // Zeroed once, then kept at zero by the kernel: a merge must never see counts left in reused
  // memory, which would make it come early.
  const size_t counters = std::max<size_t>(1, plan_.combine.size() * tiling_.grid_y());
  PDSERVE_RETURN_IF_ERROR(split_counters_.ReserveZeroed(counters * 4, stream_));
  PDSERVE_RETURN_IF_ERROR(logits_.Reserve(m * c.vocab_size * 4));
  PDSERVE_RETURN_IF_ERROR(argmax_.Reserve(m * 4));
  PDSERVE_RETURN_IF_ERROR(tokens_host_.Reserve(m * 4));
  return Status::Ok();
}

// Packs the plan's arrays into one pinned buffer and copies it up in one transfer.
Status CudaBackendImpl::UploadPlan() {
  static_assert(sizeof(AttentionItem) == 8 * sizeof(int32_t));
  static_assert(sizeof(AttentionCombine) == 4 * sizeof(int32_t));
  const StepPlan& p = plan_;
  const size_t sizes[] = {p.tokens.size(),     p.positions.size(),  p.row_table.size(),
                          p.tables.size(),     p.logit_rows.size(), p.items.size() * 8,
                          p.combine.size() * 4};
  size_t total = 0;
  for (size_t s : sizes) total += s;
  PDSERVE_RETURN_IF_ERROR(plan_host_.Reserve(total * 4));
  PDSERVE_RETURN_IF_ERROR(plan_device_.Reserve(total * 4));
  int32_t* host = plan_host_.get<int32_t>();
  const int32_t* device = plan_device_.get<int32_t>();
  const void* sources[] = {p.tokens.data(), p.positions.data(),  p.row_table.data(),
                           p.tables.data(), p.logit_rows.data(), p.items.data(),
                           p.combine.data()};
  const int32_t* starts[7];
  size_t offset = 0;
  for (int i = 0; i < 7; ++i) {
    if (sizes[i] > 0) std::memcpy(host + offset, sources[i], sizes[i] * 4);
    starts[i] = device + offset;
    offset += sizes[i];
  }
  tokens_ = starts[0];
  positions_ = starts[1];
  row_table_ = starts[2];
  tables_ = starts[3];
  logit_rows_ = starts[4];
  items_ = reinterpret_cast<const AttentionItem*>(starts[5]);
  combine_ = reinterpret_cast<const AttentionCombine*>(starts[6]);
  PDSERVE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(plan_device_.get<void>(), host, total * 4, cudaMemcpyHostToDevice, stream_));
  return Status::Ok();
}

Status CudaBackendImpl::Matmul(const bf16* x, int rows, int k, const DeviceBuffer& w, int n,
                               void* y, Out out, bool accumulate) {
  if (rows <= options_.gemv_max_rows && k % 8 == 0) {
    PDSERVE_CUDA_RETURN_IF_ERROR(
        LaunchSkinnyGemm(x, rows, k, w.get<bf16>(), n, y, out == Out::kBf16, accumulate, stream_));
    return Status::Ok();
  }
  // Row-major Y[rows][n] = X[rows][k] W[n][k]^T is column-major Y^T = W^T X^T: "TN".
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  PDSERVE_CUBLAS_RETURN_IF_ERROR(blas_->GemmEx(
      cublas_, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, &alpha, w.get<bf16>(), CUDA_R_16BF, k, x,
      CUDA_R_16BF, k, &beta, y, out == Out::kBf16 ? CUDA_R_16BF : CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
  return Status::Ok();
}

Status CudaBackendImpl::Run(const ForwardBatch& batch) {
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  // Every launch below reports cudaGetLastError(): start from none, whatever this thread's other
  // CUDA calls left (a transport's failed IPC open, say). A sticky error still shows.
  (void)cudaGetLastError();
  PDSERVE_RETURN_IF_ERROR(BuildStepPlan(batch, config_, shape_, plan_options_, &plan_));
  if (plan_.num_rows == 0) return Status::Ok();
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // the pinned plan is free
  PDSERVE_RETURN_IF_ERROR(ReserveRunBuffers());
  PDSERVE_RETURN_IF_ERROR(UploadPlan());
  const ModelConfig& c = config_;
  const int t = plan_.num_rows, q_dim = c.q_dim(), qkv_dim = q_dim + 2 * c.kv_dim();
  float* x = x_.get<float>();
  bf16* xn = xn_.get<bf16>();

  PDSERVE_CUDA_RETURN_IF_ERROR(LaunchEmbed(embed_.get<bf16>(), tokens_, t, c.dim, x, stream_));
  PDSERVE_CUDA_RETURN_IF_ERROR(LaunchRopeTable(positions_, t, inv_freq_.get<double>(),
                                               c.head_dim / 2, rope_cos_.get<float>(),
                                               rope_sin_.get<float>(), stream_));
  const QkvShape qkv_shape{c.n_heads, c.n_kv_heads, c.head_dim, shape_.page_size};
  AttentionArgs attention;
  attention.q = q_.get<float>();
  attention.tables = tables_;
  attention.items = items_;
  attention.combine = combine_;
  attention.out = att_.get<bf16>();
  attention.partial_o = partial_o_.get<float>();
  attention.partial_ml = partial_ml_.get<float>();
  if (options_.decode_attention_kernel) attention.split_counters = split_counters_.get<int>();
  attention.n_heads = c.n_heads;
  attention.n_kv_heads = c.n_kv_heads;
  attention.head_dim = c.head_dim;
  attention.page_size = shape_.page_size;
  attention.heads_per_tile = tiling_.heads_per_tile;
  attention.head_tiles = tiling_.head_tiles;
  attention.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  attention.tile_rows = plan_.max_item_tokens * tiling_.heads_per_tile;

  for (int l = 0; l < c.n_layers; ++l) {
    const DeviceLayer& w = layers_[l];
    bf16* kv_layer = static_cast<bf16*>(KvLayerData(l));
    PDSERVE_CUDA_RETURN_IF_ERROR(
        LaunchRmsNorm(x, nullptr, t, c.dim, w.attn_norm.get<float>(), c.rms_norm_eps, xn, stream_));
    PDSERVE_RETURN_IF_ERROR(
        Matmul(xn, t, c.dim, w.wqkv, qkv_dim, qkv_.get<void>(), Out::kF32, false));
    const QkNorm qk_norm{w.q_norm.get<float>(), w.k_norm.get<float>(), c.rms_norm_eps};
    PDSERVE_CUDA_RETURN_IF_ERROR(
        LaunchRopeAndWriteKv(qkv_.get<float>(), w.bqkv.get<float>(), qk_norm,
                             rope_cos_.get<float>(), rope_sin_.get<float>(), positions_, row_table_,
                             tables_, t, qkv_shape, q_.get<float>(), kv_layer, stream_));
    if (batch.after_layer_kv) {
      PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      batch.after_layer_kv(l);
      // The launches below check cudaGetLastError(); what the callback's own CUDA calls left
      // there (cudaErrorNotReady from polling an event) is not theirs. A sticky error stays.
      (void)cudaGetLastError();
    }
    attention.kv = kv_layer;
    PDSERVE_CUDA_RETURN_IF_ERROR(
        LaunchPagedAttention(attention, static_cast<int>(plan_.items.size()),
                             static_cast<int>(plan_.combine.size()), stream_));
    PDSERVE_RETURN_IF_ERROR(Matmul(att_.get<bf16>(), t, q_dim, w.wo, c.dim, x, Out::kF32, true));

    PDSERVE_CUDA_RETURN_IF_ERROR(
        LaunchRmsNorm(x, nullptr, t, c.dim, w.mlp_norm.get<float>(), c.rms_norm_eps, xn, stream_));
    PDSERVE_RETURN_IF_ERROR(Matmul(xn, t, c.dim, w.w_gate_up, 2 * c.hidden_dim,
                                   gate_up_.get<void>(), Out::kBf16, false));
    PDSERVE_CUDA_RETURN_IF_ERROR(
        LaunchSwiGlu(gate_up_.get<bf16>(), t, c.hidden_dim, act_.get<bf16>(), stream_));
    PDSERVE_RETURN_IF_ERROR(
        Matmul(act_.get<bf16>(), t, c.hidden_dim, w.w_down, c.dim, x, Out::kF32, true));
  }

  // Final norm and LM head on the rows whose logits were asked for.
  const int m = static_cast<int>(plan_.logit_rows.size());
  if (m == 0) return Status::Ok();
  PDSERVE_CUDA_RETURN_IF_ERROR(LaunchRmsNorm(x, logit_rows_, m, c.dim, final_norm_.get<float>(),
                                             c.rms_norm_eps, xn, stream_));
  return Matmul(xn, m, c.dim, lm_head_.bytes() ? lm_head_ : embed_, c.vocab_size,
                logits_.get<void>(), Out::kF32, false);
}

Status CudaBackendImpl::Forward(const ForwardBatch& batch, std::vector<float>* logits) {
  Status status = Run(batch);
  if (status.ok()) {
    const size_t n = plan_.logit_rows.size() * static_cast<size_t>(config_.vocab_size);
    logits->resize(n);
    if (n > 0) {
      const cudaError_t copy = cudaMemcpyAsync(logits->data(), logits_.get<float>(), n * 4,
                                               cudaMemcpyDeviceToHost, stream_);
      if (copy != cudaSuccess)
        status = CudaStatus(copy, "cudaMemcpyAsync(logits)", __FILE__, __LINE__);
    }
  }
  return Finish(std::move(status));
}

Status CudaBackendImpl::ForwardGreedy(const ForwardBatch& batch, std::vector<int32_t>* tokens) {
  Status status = Run(batch);
  const int m = static_cast<int>(plan_.logit_rows.size());
  if (status.ok() && m > 0) {
    cudaError_t error =
        LaunchArgmax(logits_.get<float>(), m, config_.vocab_size, argmax_.get<int32_t>(), stream_);
    if (error == cudaSuccess) {
      error = cudaMemcpyAsync(tokens_host_.get<int32_t>(), argmax_.get<int32_t>(), m * 4,
                              cudaMemcpyDeviceToHost, stream_);
    }
    if (error != cudaSuccess) status = CudaStatus(error, "argmax", __FILE__, __LINE__);
  }
  status = Finish(std::move(status));
  if (status.ok()) tokens->assign(tokens_host_.get<int32_t>(), tokens_host_.get<int32_t>() + m);
  return status;
}

}  // namespace
}  // namespace cuda

bool CudaBackendBuilt() { return true; }

int CudaDeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

Result<std::string> CudaDeviceUuid(int device) {
  cudaDeviceProp props;
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, device));
  std::array<unsigned char, 16> bytes;
  std::memcpy(bytes.data(), props.uuid.bytes, bytes.size());
  return FormatGpuUuid(bytes);
}

Result<std::unique_ptr<CudaBackend>> CreateCudaBackend(std::shared_ptr<const Weights> weights,
                                                       const ModelConfig& config,
                                                       const CudaBackendOptions& options) {
  if (options.num_pages < 1 || options.page_size < 1) {
    return InvalidArgument("KV pool needs at least one page of at least one token");
  }
  if (options.gemv_max_rows < 0 || options.gemv_max_rows > cuda::kSkinnyGemmMaxRows) {
    return InvalidArgument("gemv_max_rows must be in 0.." +
                           std::to_string(cuda::kSkinnyGemmMaxRows));
  }
  if (!weights && !options.random_weights_seed) return InvalidArgument("no weights");
  if (config.head_dim % 2 != 0 || config.head_dim < 2 || config.head_dim > 256) {
    return Unimplemented("the CUDA backend needs an even head_dim of at most 256, not " +
                         std::to_string(config.head_dim));
  }
  if (config.n_kv_heads < 1 || config.n_heads % config.n_kv_heads != 0) {
    return InvalidArgument("n_heads must be a multiple of n_kv_heads");
  }
  if (config.qk_norm && config.n_heads + config.n_kv_heads > cuda::kQkNormMaxHeads) {
    return Unimplemented("the CUDA backend normalises q and k of at most " +
                         std::to_string(cuda::kQkNormMaxHeads) + " heads together, not " +
                         std::to_string(config.n_heads + config.n_kv_heads));
  }
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    return FailedPrecondition("no CUDA device: cudaGetDeviceCount: " +
                              std::string(cudaGetErrorString(error)));
  }
  if (options.device < 0 || options.device >= count) {
    return NotFound("no CUDA device " + std::to_string(options.device) + ": this machine has " +
                    std::to_string(count));
  }
  auto backend = std::make_unique<cuda::CudaBackendImpl>(config, options);
  PDSERVE_RETURN_IF_ERROR(backend->Init(weights.get()));
  return std::unique_ptr<CudaBackend>(std::move(backend));
}

}  // namespace pdserve::model
