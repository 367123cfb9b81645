// The CUDA backend's kernels, as host functions that launch them on a stream. Shapes follow
// model/cpu_backend.cc's maths and the KV page layout of docs/architecture.md ("KV layout"). Each
// launcher returns cudaGetLastError() after its launch, so the caller checks it with
// PDSERVE_CUDA_RETURN_IF_ERROR (cuda_check.h) at its own file and line. Launchers only enqueue
// work; they are safe from any thread for distinct streams.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "model/cuda/attention_layout.h"
#include "model/cuda/copy_tiles.h"

namespace pdserve::model::cuda {

using bf16 = __nv_bfloat16;

// x[r][:] = embed[tokens[r]][:], as f32. embed: [vocab][dim].
cudaError_t LaunchEmbed(const bf16* embed, const int32_t* tokens, int rows, int dim, float* x,
                        cudaStream_t stream);

// out[r][:] = bf16(x[src][:] / sqrt(mean(x[src]^2) + eps) * weight), src = rows ? rows[r] : r.
cudaError_t LaunchRmsNorm(const float* x, const int32_t* rows, int n_rows, int dim,
                          const float* weight, float eps, bf16* out, cudaStream_t stream);

// cos/sin[r][i] = float(cos/sin(positions[r] * inv_freq[i])) in double, i < half (as the CPU).
cudaError_t LaunchRopeTable(const int32_t* positions, int rows, const double* inv_freq, int half,
                            float* cos_table, float* sin_table, cudaStream_t stream);

struct QkvShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int page_size = 0;
};

// Qwen3's per-head RMSNorm of q and k: each head's x * (1 / sqrt(mean(x^2) + eps)) * weight.
struct QkNorm {
  const float* q = nullptr;  // [head_dim]; null: no q/k norm
  const float* k = nullptr;  // [head_dim]
  float eps = 0;
};

// The most heads (query and key together) LaunchRopeAndWriteKv normalises: one float of shared
// memory each.
inline constexpr int kQkNormMaxHeads = 8192;

// For each row r of qkv ([rows][q_dim + 2 kv_dim], f32, the fused projection's output): adds
// the bias (may be null), normalises each head of q and of k when norm.q is set, rotates q and
// k (rotate_half convention) with the row's cos/sin, writes q to q_out ([rows][q_dim], f32) and
// k, v as bf16 into the layer's KV pages at the row's position: page
// tables[row_table[r] + pos / page_size], slot pos % page_size. With norm.q, n_heads +
// n_kv_heads must be at most kQkNormMaxHeads (else cudaErrorInvalidValue).
cudaError_t LaunchRopeAndWriteKv(const float* qkv, const float* bias, const QkNorm& norm,
                                 const float* cos_table, const float* sin_table,
                                 const int32_t* positions, const int32_t* row_table,
                                 const int32_t* tables, int rows, const QkvShape& shape,
                                 float* q_out, bf16* kv_layer, cudaStream_t stream);

// act[r][j] = bf16(silu(g) * u), g = gate_up[r][j], u = gate_up[r][hidden + j].
cudaError_t LaunchSwiGlu(const bf16* gate_up, int rows, int hidden, bf16* act, cudaStream_t stream);

// out[r] = the index of the largest logits[r][:], the lowest among equal maxima (as Sampler).
cudaError_t LaunchArgmax(const float* logits, int rows, int vocab, int32_t* out,
                         cudaStream_t stream);

// Normal random numbers mean + stddev * N(0, 1), a counter-based stream named by `seed`.
cudaError_t LaunchFillNormal(bf16* out, size_t n, uint64_t seed, float mean, float stddev,
                             cudaStream_t stream);
cudaError_t LaunchFillNormal(float* out, size_t n, uint64_t seed, float mean, float stddev,
                             cudaStream_t stream);

// y[r][n] (+)= sum_k x[r][k] w[n][k] for a few rows (decode steps), reading each weight once:
// a memory-bound kernel for what cuBLAS would run as a skinny GEMM. x: [rows][k], w: [n][k] bf16,
// y: [rows][n] f32 or bf16 (y_bf16); accumulate adds to y (f32 only). Needs k % 8 == 0 and
// 1 <= rows <= kSkinnyGemmMaxRows.
inline constexpr int kSkinnyGemmMaxRows = 8;
cudaError_t LaunchSkinnyGemm(const bf16* x, int rows, int k, const bf16* w, int n, void* y,
                             bool y_bf16, bool accumulate, cudaStream_t stream);

struct AttentionArgs {
  const float* q = nullptr;         // [rows][n_heads * head_dim], rotated
  const bf16* kv = nullptr;         // the layer's pool [num_pages][2][page_size][kv_dim]
  const int32_t* tables = nullptr;  // the step's block tables
  const AttentionItem* items = nullptr;
  const AttentionCombine* combine = nullptr;
  bf16* out = nullptr;          // [rows][n_heads * head_dim]
  float* partial_o = nullptr;   // [partials][grid_y][max_rows][head_dim]
  float* partial_ml = nullptr;  // [partials][grid_y][max_rows][2]: running max and sum
  // [combine entries][grid_y], all zero between launches: the decode kernel counts the splits
  // of a tile that are done, and the last merges them (and sets its count back to zero). Null:
  // the decode kernel is not used.
  int* split_counters = nullptr;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int page_size = 0;
  int heads_per_tile = 0;  // query heads of one KV head per block
  int head_tiles = 0;      // ceil(group / heads_per_tile); grid_y = n_kv_heads * head_tiles
  // The most query rows (tokens x heads) any item of the step holds; 0: AttentionMaxRows. The
  // kernel is compiled for 4, 8 and 16 rows and takes the smallest that holds them: rows past
  // the item's are predicated off but still run their instructions.
  int tile_rows = 0;
  float scale = 0;  // 1 / sqrt(head_dim)
};

// Causal attention of every item's rows over the paged KV (prompt chunks and decode rows alike),
// then the merge of split tiles. Needs head_dim even and <= 256. A step whose items are one
// token each (tile_rows == heads_per_tile) runs the decode kernel where it applies
// (DecodeAttentionApplies).
cudaError_t LaunchPagedAttention(const AttentionArgs& args, int n_items, int n_combine,
                                 cudaStream_t stream);

// Whether LaunchPagedAttention takes the decode kernel: one-token items, head_dim a multiple of
// 8 up to 256, at most 8 query heads a tile, and split counters given.
bool DecodeAttentionApplies(const AttentionArgs& args);

// The decode kernel alone (decode_attention.cu), splits merged in the kernel; only where
// DecodeAttentionApplies.
cudaError_t LaunchDecodeAttention(const AttentionArgs& args, int n_items, cudaStream_t stream);

// Copies every tile (copy_tiles.h; `tiles` in device memory), a block each, by the SMs. The
// addresses may be another process's memory mapped by CUDA IPC on this device.
cudaError_t LaunchCopyTiles(const CopyTile* tiles, int n_tiles, cudaStream_t stream);

}  // namespace pdserve::model::cuda
