#include "model/cpu_backend.h"

#include <spdlog/spdlog.h>

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <utility>

#include "model/cpu_attention.h"
#include "model/cpu_matmul.h"
#include "model/huge_pages.h"
#include "model/rms_norm.h"
#include "model/simd.h"

namespace pdserve::model {
namespace {

// Batches of up to this many rows normalise inside the matrix products (cpu_matmul.h's RowNorm).
constexpr int kNormInProductRows = 64;

class CpuBackend final : public Backend {
 public:
  CpuBackend(std::shared_ptr<const Weights> weights, const ModelConfig& config,
             const CpuBackendOptions& options)
      : weights_(std::move(weights)), config_(config), inv_freq_(config.RopeInverseFrequencies()) {
    shape_.n_layers = config.n_layers;
    shape_.num_pages = options.num_pages;
    shape_.page_size = options.page_size;
    shape_.n_kv_heads = config.n_kv_heads;
    shape_.head_dim = config.head_dim;
    shape_.dtype = DType::kF32;
    // In huge pages: attention reads one KV head's slice (a quarter of each row, for 4 KV heads)
    // of pages scattered over the pool, which through 4 KiB pages missed the TLB every few rows.
    // Zeroed, and committed as pages are first written: a pool sized for a long context costs
    // what its sequences use (zeroing it whole took 547 MB and most of a short run's time).
    for (int l = 0; l < config.n_layers; ++l) {
      kv_.push_back(AllocateZeroedHugePageBuffer(shape_.layer_bytes()));
    }
    threads_ =
        options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  }

  const ModelConfig& config() const override { return config_; }
  const KvCacheShape& kv_shape() const override { return shape_; }
  std::string device() const override { return "cpu"; }
  void* KvLayerData(int layer) override { return kv_[layer].get(); }

  Status Forward(const ForwardBatch& batch, std::vector<float>* logits) override;

 private:
  Status Validate(const ForwardBatch& batch) const;
  void PrepareRows(const ForwardBatch& batch);
  void Attention(int layer);
  // The key and value rows token r attends to in `layer`, page by page.
  void RowRegions(int layer, int r, std::vector<MemoryRegion>* regions) const;
  // Stores row r's key and value (RoPE applied) into its page of the layer's pool.
  void WriteKv(int layer, int r);

  std::shared_ptr<const Weights> weights_;
  ModelConfig config_;
  KvCacheShape shape_;
  std::vector<double> inv_freq_;
  std::vector<std::shared_ptr<void>> kv_;  // per layer, f32 in the KvCacheShape layout
  int threads_ = 1;

  // Per-step run buffers; they grow to the largest step seen and stay.
  struct Row {
    int pos;
    const int32_t* pages;
  };
  std::vector<Row> rows_;
  std::vector<float> x_, xn_, q_, k_, v_, att_, gate_;  // gate_: SwiGLU's output
  std::vector<float> rope_cos_, rope_sin_;              // [T][head_dim/2]
};

Status CpuBackend::Validate(const ForwardBatch& batch) const {
  return ValidateBatch(batch, config_, shape_);
}

void CpuBackend::PrepareRows(const ForwardBatch& batch) {
  const int t = batch.num_tokens();
  const ModelConfig& c = config_;
  rows_.clear();
  x_.resize(static_cast<size_t>(t) * c.dim);
  for (const auto& chunk : batch.chunks) {
    for (size_t i = 0; i < chunk.tokens.size(); ++i) {
      const size_t r = rows_.size();
      rows_.push_back({chunk.start_pos + static_cast<int>(i), chunk.pages.data()});
      const size_t offset =
          static_cast<size_t>(chunk.tokens[i]) * c.dim * DTypeSize(weights_->embed.dtype);
      ConvertToFloat(weights_->embed.dtype,
                     static_cast<const uint8_t*>(weights_->embed.data) + offset, &x_[r * c.dim],
                     c.dim);
    }
  }
  const int half = c.head_dim / 2;
  rope_cos_.resize(static_cast<size_t>(t) * half);
  rope_sin_.resize(static_cast<size_t>(t) * half);
  for (int r = 0; r < t; ++r) {
    for (int i = 0; i < half; ++i) {
      const double angle = rows_[r].pos * inv_freq_[i];
      rope_cos_[r * half + i] = static_cast<float>(std::cos(angle));
      rope_sin_[r * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  xn_.resize(x_.size());
  q_.resize(static_cast<size_t>(t) * c.q_dim());
  att_.resize(q_.size());
  k_.resize(static_cast<size_t>(t) * c.kv_dim());
  v_.resize(k_.size());
  gate_.resize(static_cast<size_t>(t) * c.hidden_dim);
}

// Rotates pairs (i, i + head_dim/2) of each head, the Hugging Face "rotate_half" convention.
void ApplyRope(float* vec, int n_heads, int head_dim, const float* cos, const float* sin) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = vec + h * head_dim;
    for (int i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cos[i] - b * sin[i];
      v[i + half] = b * cos[i] + a * sin[i];
    }
  }
}

void CpuBackend::WriteKv(int layer, int r) {
  const int kv_dim = config_.kv_dim();
  auto* pool = static_cast<float*>(kv_[layer].get());
  const int pos = rows_[r].pos;
  const int page = rows_[r].pages[pos / shape_.page_size];
  const int slot = pos % shape_.page_size;
  std::copy_n(&k_[static_cast<size_t>(r) * kv_dim], kv_dim, pool + shape_.Offset(page, 0, slot));
  std::copy_n(&v_[static_cast<size_t>(r) * kv_dim], kv_dim, pool + shape_.Offset(page, 1, slot));
}

void CpuBackend::RowRegions(int layer, int r, std::vector<MemoryRegion>* regions) const {
  const auto* pool = static_cast<const float*>(kv_[layer].get());
  const size_t slot_bytes = static_cast<size_t>(config_.kv_dim()) * sizeof(float);
  const int count = rows_[r].pos + 1;
  regions->clear();
  for (int p = 0, first = 0; first < count; ++p, first += shape_.page_size) {
    const size_t bytes = std::min(shape_.page_size, count - first) * slot_bytes;
    for (int kv = 0; kv < 2; ++kv)
      regions->push_back({pool + shape_.Offset(rows_[r].pages[p], kv, 0), bytes});
  }
}

void CpuBackend::Attention(int layer) {
  const ModelConfig& c = config_;
  const int hd = c.head_dim, kv_heads = c.n_kv_heads;
  const int t = static_cast<int>(rows_.size());
  const auto* pool = static_cast<const float*>(kv_[layer].get());
  // A row's KV heads together, so its key and value rows are read front to back, when there
  // are rows enough for every thread; else one KV head per item. The results are the same bits.
  const int heads_per_item = t >= 4 * threads_ ? kv_heads : 1;
  const int items_per_row = kv_heads / heads_per_item;
  const int items = t * items_per_row;
  // Whole rows of a decode step come from memory: a thread reads its first token's in one
  // sweep, and fetches each next token's while it works on the one before. Tokens of one
  // sequence (a prompt) share their rows, which stay in cache from token to token. Items of
  // one KV head (small batches) read their slices in one sweep each.
  const bool whole_rows = heads_per_item == kv_heads;
  // Items are handed out one ahead, so that a thread knows which token it takes next.
  std::atomic<int> next_item{0};
#pragma omp parallel
  {
    // Per OpenMP thread, reused from layer to layer.
    thread_local std::vector<float> scratch;
    thread_local std::vector<const float*> keys, values;
    thread_local std::vector<MemoryRegion> regions;
    int item = next_item.fetch_add(1, std::memory_order_relaxed);
    if (whole_rows && item < items) {
      RowRegions(layer, item, &regions);
      WarmRegions(regions);
    }
    while (item < items) {
      const int following = next_item.fetch_add(1, std::memory_order_relaxed);
      const int r = item / items_per_row, g = item % items_per_row * heads_per_item;
      regions.clear();
      if (whole_rows && following < items && rows_[following].pages != rows_[r].pages) {
        RowRegions(layer, following, &regions);
      }
      const int count = rows_[r].pos + 1;
      const int32_t* pages = rows_[r].pages;
      keys.resize(count);
      values.resize(count);
      for (int j = 0, p = 0; j < count; ++p) {  // page by page: no division per position
        for (int slot = 0; slot < shape_.page_size && j < count; ++slot, ++j) {
          keys[j] = pool + shape_.Offset(pages[p], 0, slot);
          values[j] = pool + shape_.Offset(pages[p], 1, slot);
        }
      }
      if (!whole_rows) {
        // One KV head's slice of each row, too sparse for the hardware prefetchers to follow:
        // read in one sweep of independent loads first, so that their misses overlap
        // (docs/benchmarks.md, Attention).
        const size_t slice = static_cast<size_t>(heads_per_item) * hd * sizeof(float);
        for (int j = 0; j < count; ++j) {
          regions.push_back({keys[j] + g * hd, slice});
          regions.push_back({values[j] + g * hd, slice});
        }
        WarmRegions(regions);
        regions.clear();
      }
      const AttentionRow a{&q_[static_cast<size_t>(r) * c.q_dim()],
                           keys.data(),
                           values.data(),
                           count,
                           g,
                           g + heads_per_item,
                           c.n_heads / kv_heads,
                           hd,
                           1.0f / std::sqrt(static_cast<float>(hd)),
                           regions};
      scratch.resize(AttentionScratchFloats(a));
      AttendRow(a, scratch.data(), &att_[static_cast<size_t>(r) * c.q_dim()]);
      item = following;
    }
  }
}

Status CpuBackend::Forward(const ForwardBatch& batch, std::vector<float>* logits) {
  PDSERVE_RETURN_IF_ERROR(Validate(batch));
  omp_set_num_threads(threads_);
  PrepareRows(batch);
  const ModelConfig& c = config_;
  const int t = static_cast<int>(rows_.size());
  const int half = c.head_dim / 2;

  // Row-wise steps run on the OpenMP threads only when the batch is big enough to pay for it.
  const bool rows_in_parallel = t >= 8;
  // A decode batch's norms happen as the products read x_: no pass, and no fork and join, of
  // their own. A prompt's in a pass split between the threads: in the products, every thread
  // would normalise every row of a long prompt (docs/benchmarks.md, Decode and prefill
  // throughput).
  const bool norms_in_products = t <= kNormInProductRows;
  // x_ and the norm for a product, or xn_ normalised and none.
  auto norm_input = [&](const RowNorm& norm) -> std::pair<const float*, const RowNorm*> {
    if (norms_in_products) return {x_.data(), &norm};
#pragma omp parallel for
    for (int r = 0; r < t; ++r)
      RmsNorm(&x_[static_cast<size_t>(r) * c.dim], norm.weight, c.dim, norm.eps,
              &xn_[static_cast<size_t>(r) * c.dim]);
    return {xn_.data(), nullptr};
  };
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = weights_->layers[l];
    const MatMulTarget qkv[] = {{&w.wq, q_.data(), c.q_dim()},
                                {&w.wk, k_.data(), c.kv_dim()},
                                {&w.wv, v_.data(), c.kv_dim()}};
    const RowNorm attn_norm{w.attn_norm.data(), c.rms_norm_eps};
    const auto [attn_in, attn_fused] = norm_input(attn_norm);
    MatMulMany(attn_in, t, c.dim, qkv, attn_fused);
#pragma omp parallel for if (rows_in_parallel)
    for (int r = 0; r < t; ++r) {
      float* q = &q_[static_cast<size_t>(r) * c.q_dim()];
      float* k = &k_[static_cast<size_t>(r) * c.kv_dim()];
      float* v = &v_[static_cast<size_t>(r) * c.kv_dim()];
      if (!w.bq.empty()) {
        for (int i = 0; i < c.q_dim(); ++i) q[i] += w.bq[i];
        for (int i = 0; i < c.kv_dim(); ++i) k[i] += w.bk[i];
        for (int i = 0; i < c.kv_dim(); ++i) v[i] += w.bv[i];
      }
      if (!w.q_norm.empty()) {  // each head on its own, in place
        for (int h = 0; h < c.n_heads; ++h) {
          float* head = q + h * c.head_dim;
          RmsNorm(head, w.q_norm.data(), c.head_dim, c.rms_norm_eps, head);
        }
        for (int h = 0; h < c.n_kv_heads; ++h) {
          float* head = k + h * c.head_dim;
          RmsNorm(head, w.k_norm.data(), c.head_dim, c.rms_norm_eps, head);
        }
      }
      ApplyRope(q, c.n_heads, c.head_dim, &rope_cos_[r * half], &rope_sin_[r * half]);
      ApplyRope(k, c.n_kv_heads, c.head_dim, &rope_cos_[r * half], &rope_sin_[r * half]);
      // Here rather than in a pass of its own: a batch's rows land in pages that are not in
      // cache, and the threads share the wait.
      WriteKv(l, r);
    }
    if (batch.after_layer_kv) batch.after_layer_kv(l);
    Attention(l);
    MatMul(att_.data(), t, c.q_dim(), w.wo, x_.data(), c.dim, MatMulStore::kAdd);

    const RowNorm mlp_norm{w.mlp_norm.data(), c.rms_norm_eps};
    const auto [mlp_in, mlp_fused] = norm_input(mlp_norm);
    MatMulSwiGlu(mlp_in, t, c.dim, w.w_gate, w.w_up, gate_.data(), c.hidden_dim, mlp_fused);
    MatMul(gate_.data(), t, c.hidden_dim, w.w_down, x_.data(), c.dim, MatMulStore::kAdd);
  }

  // Final norm and LM head on the rows whose logits were asked for.
  std::vector<int> logit_rows;
  int row = 0;
  for (const auto& chunk : batch.chunks) {
    const int n = static_cast<int>(chunk.tokens.size());
    for (int i = 0; i < n; ++i) {
      if (batch.HasLogitRow(chunk, i)) logit_rows.push_back(row + i);
    }
    row += n;
  }
  const int m = static_cast<int>(logit_rows.size());
  for (int i = 0; i < m; ++i) {
    RmsNorm(&x_[static_cast<size_t>(logit_rows[i]) * c.dim], weights_->final_norm.data(), c.dim,
            c.rms_norm_eps, &xn_[static_cast<size_t>(i) * c.dim]);
  }
  logits->resize(static_cast<size_t>(m) * c.vocab_size);
  MatMul(xn_.data(), m, c.dim, weights_->lm_head, logits->data(), c.vocab_size);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Backend>> CreateCpuBackend(std::shared_ptr<const Weights> weights,
                                                  const ModelConfig& config,
                                                  const CpuBackendOptions& options) {
  if (options.num_pages < 1 || options.page_size < 1) {
    return InvalidArgument("KV pool needs at least one page of at least one token");
  }
  if (!weights) return InvalidArgument("no weights");
  // The copy is the worker's own: workers on one host no longer share the file's page cache.
  // Past a quarter of the memory available, serve from the file maps instead.
  const size_t bytes = weights->MatrixBytes();
  const size_t available =
      options.available_memory_bytes > 0 ? options.available_memory_bytes : AvailableMemoryBytes();
  if (CopyFitsInMemory(bytes, available)) {
    weights = Weights::InHugePages(std::move(weights));
  } else {
    spdlog::warn(
        "CPU backend: serving the weights from the file maps; copying their {:.1f} GB into huge "
        "pages would take more than a quarter of the {:.1f} GB available (decode runs slower "
        "through 4 KiB pages)",
        bytes / 1e9, available / 1e9);
  }
  return std::unique_ptr<Backend>(
      std::make_unique<CpuBackend>(std::move(weights), config, options));
}

}  // namespace pdserve::model
