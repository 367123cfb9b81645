// Paged causal attention (kernels.h, LaunchPagedAttention) for prompt chunks and decode rows
// alike, flash-decoding style. A block takes one AttentionItem (a tile of query rows of one
// sequence, and a range of its keys) for one head tile (query heads that share a KV head, so K
// and V are read once for all of them). Its four warps take turns over the key range, 32 keys a
// time: lane j scores key j against every row (q rows sit in shared memory), an online softmax
// keeps each row's running max and sum, and the probabilities are broadcast through shared
// memory to accumulate P·V with each lane owning DL consecutive dimensions. The warps' partial
// results are merged in shared memory; a tile whose keys were split over several items writes
// partial (max, sum, unnormalised output) and the combine kernel merges the splits.
// The maths is the CPU backend's: scores q·k / sqrt(head_dim), softmax, weighted sum of V, in f32
// (K and V are read from bf16 pages).
#include <math_constants.h>

#include "model/cuda/attention_device.cuh"
#include "model/cuda/device_math.cuh"
#include "model/cuda/kernels.h"

namespace pdserve::model::cuda {
namespace {

constexpr int kWarps = kAttentionWarps;
constexpr int kThreads = kWarps * 32;
// Loads each lane issues before using the first: latency, not bandwidth, bounds a decode step's
// attention, and these keep several global loads in flight.
constexpr int kScoreLoads = 4;  // 16-byte pieces of a key row
// Value rows: 32 / DL, so that the loaded values take 32 registers whatever DL is.
template <int DL>
constexpr int kValueLoads = 32 / DL;

// s[r] = q_s[r] · k for r < rows, k a bf16 row of head_dim elements in global memory.
template <int RMAX>
__device__ __forceinline__ void Scores(const float* q_s, const bf16* k, int hd, int rows,
                                       float (&s)[RMAX]) {
#pragma unroll
  for (int r = 0; r < RMAX; ++r) s[r] = 0.0f;
  if ((hd & 7) == 0) {  // 16-byte loads, kScoreLoads in flight; row offsets are multiples of hd
    for (int d0 = 0; d0 < hd; d0 += 8 * kScoreLoads) {
      uint4 raw[kScoreLoads];
#pragma unroll
      for (int u = 0; u < kScoreLoads; ++u) {
        const int d = d0 + 8 * u;
        raw[u] = d < hd ? __ldg(reinterpret_cast<const uint4*>(k + d)) : uint4{};
      }
#pragma unroll
      for (int u = 0; u < kScoreLoads; ++u) {
        const int d = d0 + 8 * u;
        if (d >= hd) break;
        float kf[8];
        Unpack8(raw[u], kf);
#pragma unroll
        for (int r = 0; r < RMAX; ++r) {
          if (r < rows) {
            const float4 a = *reinterpret_cast<const float4*>(q_s + r * hd + d);
            const float4 b = *reinterpret_cast<const float4*>(q_s + r * hd + d + 4);
            float acc = s[r];
            acc = fmaf(a.x, kf[0], acc);
            acc = fmaf(a.y, kf[1], acc);
            acc = fmaf(a.z, kf[2], acc);
            acc = fmaf(a.w, kf[3], acc);
            acc = fmaf(b.x, kf[4], acc);
            acc = fmaf(b.y, kf[5], acc);
            acc = fmaf(b.z, kf[6], acc);
            acc = fmaf(b.w, kf[7], acc);
            s[r] = acc;
          }
        }
      }
    }
  } else {  // head_dim even: 4-byte loads
    for (int d = 0; d < hd; d += 2) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(k + d));
#pragma unroll
      for (int r = 0; r < RMAX; ++r) {
        if (r < rows) s[r] = fmaf(q_s[r * hd + d + 1], f.y, fmaf(q_s[r * hd + d], f.x, s[r]));
      }
    }
  }
}

// v[i] = row[lane * DL + i] as f32 (0 past head_dim).
template <int DL>
__device__ __forceinline__ void LoadDims(const bf16* row, int lane, int hd, float (&v)[DL]) {
  const int d0 = lane * DL;
  if (d0 + DL <= hd && hd % DL == 0) {
    if constexpr (DL == 8) {
      Unpack8(*reinterpret_cast<const uint4*>(row + d0), v);
    } else if constexpr (DL == 4) {
      const uint2 raw = *reinterpret_cast<const uint2*>(row + d0);
      const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&raw);
      const float2 a = __bfloat1622float2(p[0]), b = __bfloat1622float2(p[1]);
      v[0] = a.x;
      v[1] = a.y;
      v[2] = b.x;
      v[3] = b.y;
    } else if constexpr (DL == 2) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(row + d0));
      v[0] = f.x;
      v[1] = f.y;
    } else {
      v[0] = __bfloat162float(row[d0]);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < DL; ++i) v[i] = d0 + i < hd ? __bfloat162float(row[d0 + i]) : 0.0f;
}

template <int DL, int RMAX>
__global__ void __launch_bounds__(kThreads) PagedAttentionKernel(AttentionArgs a) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const AttentionItem item = a.items[blockIdx.x];
  const HeadTile ht = HeadTileOf(a);
  const int hd = a.head_dim, ps = a.page_size;
  const int rows = item.n_rows * ht.n_heads_here;  // <= RMAX, the planner's promise
  const int q_dim = a.n_heads * hd, kv_dim = a.n_kv_heads * hd;
  const size_t page_stride = 2ull * ps * kv_dim;
  const size_t value_offset = static_cast<size_t>(ps) * kv_dim;  // V rows follow a page's K rows
  const int32_t* table = a.tables + item.table;
  const bf16* kv_head = a.kv + static_cast<size_t>(ht.kv_head) * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  float* q_s = smem;              // [RMAX][hd]
  float* p_s = smem + RMAX * hd;  // [kWarps][RMAX][32]
  float* my_p = p_s + warp * RMAX * 32;
  for (int i = threadIdx.x; i < rows * hd; i += kThreads) {
    const int r = i / hd, d = i % hd;
    const int head = ht.first_head + r % ht.n_heads_here;
    q_s[i] = a.q[static_cast<size_t>(item.row0 + r / ht.n_heads_here) * q_dim + head * hd + d];
  }
  __syncthreads();

  float m[RMAX], l[RMAX], o[RMAX][DL];
#pragma unroll
  for (int r = 0; r < RMAX; ++r) {
    m[r] = kNegInf;
    l[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < DL; ++i) o[r][i] = 0.0f;
  }

  for (int start = item.key_begin + warp * 32; start < item.key_end; start += kWarps * 32) {
    // Lane j takes key start + j; its row's offset in the pool is shared with the warp for P·V.
    const int key = start + lane;
    const int clamped = min(key, item.key_end - 1);
    const unsigned long long row =
        static_cast<unsigned long long>(table[clamped / ps]) * page_stride +
        static_cast<unsigned long long>(clamped % ps) * kv_dim;
    float s[RMAX];
    if (key < item.key_end) {
      const bf16* k = kv_head + row;
      Scores<RMAX>(q_s, k, hd, rows, s);
#pragma unroll
      for (int r = 0; r < RMAX; ++r) {
        const bool visible = r < rows && key <= item.pos0 + r / ht.n_heads_here;  // causal
        s[r] = visible ? s[r] * a.scale : kNegInf;
      }
    } else {
#pragma unroll
      for (int r = 0; r < RMAX; ++r) s[r] = kNegInf;
    }
    // Online softmax: rescale what was summed so far to the new running max.
#pragma unroll
    for (int r = 0; r < RMAX; ++r) {
      if (r < rows) {  // rows is the same for the whole warp, so the shuffles see every lane
        const float m_new = fmaxf(m[r], WarpMax(s[r]));
        float p = 0.0f, alpha = 1.0f;
        if (m_new != kNegInf) {
          p = expf(s[r] - m_new);      // 0 for a masked key
          alpha = expf(m[r] - m_new);  // 0 while nothing was visible yet
        }
        l[r] = l[r] * alpha + WarpSum(p);
        m[r] = m_new;
#pragma unroll
        for (int i = 0; i < DL; ++i) o[r][i] *= alpha;
        my_p[r * 32 + lane] = p;
      }
    }
    __syncwarp();
    // P·V, kValueLoads value rows in flight: each lane loads its DL dimensions of every row
    // (a past-the-end row is clamped to the last key and skipped below).
    const int n_keys = min(32, item.key_end - start);
    for (int j0 = 0; j0 < n_keys; j0 += kValueLoads<DL>) {
      float vv[kValueLoads<DL>][DL];
#pragma unroll
      for (int u = 0; u < kValueLoads<DL>; ++u) {
        const unsigned long long key_row = __shfl_sync(0xffffffffu, row, min(j0 + u, n_keys - 1));
        LoadDims<DL>(kv_head + key_row + value_offset, lane, hd, vv[u]);
      }
#pragma unroll
      for (int u = 0; u < kValueLoads<DL>; ++u) {
        if (j0 + u >= n_keys) break;
#pragma unroll
        for (int r = 0; r < RMAX; ++r) {
          if (r < rows) {
            const float pj = my_p[r * 32 + j0 + u];
#pragma unroll
            for (int i = 0; i < DL; ++i) o[r][i] = fmaf(pj, vv[u][i], o[r][i]);
          }
        }
      }
    }
    __syncwarp();  // my_p is rewritten by the next tile
  }

  // Merge the warps: q_s and p_s are dead, their space holds each warp's (m, l, o).
  __syncthreads();
  float* o_s = smem;                        // [kWarps][RMAX][hd]
  float* ml_s = smem + kWarps * RMAX * hd;  // [kWarps][RMAX][2]
#pragma unroll
  for (int r = 0; r < RMAX; ++r) {
    if (r < rows) {
#pragma unroll
      for (int i = 0; i < DL; ++i) {
        const int d = lane * DL + i;
        if (d < hd) o_s[(warp * RMAX + r) * hd + d] = o[r][i];
      }
      if (lane == 0) {
        ml_s[(warp * RMAX + r) * 2] = m[r];
        ml_s[(warp * RMAX + r) * 2 + 1] = l[r];
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < rows * hd; i += kThreads) {
    const int r = i / hd, d = i % hd;
    float mx = kNegInf;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, ml_s[(w * RMAX + r) * 2]);
    float sum = 0.0f, out = 0.0f;
    if (mx != kNegInf) {
      for (int w = 0; w < kWarps; ++w) {
        const float mw = ml_s[(w * RMAX + r) * 2];
        if (mw == kNegInf) continue;
        const float f = expf(mw - mx);
        sum = fmaf(ml_s[(w * RMAX + r) * 2 + 1], f, sum);
        out = fmaf(o_s[(w * RMAX + r) * hd + d], f, out);
      }
    }
    if (item.partial < 0) {
      const int head = ht.first_head + r % ht.n_heads_here;
      const size_t row = item.row0 + r / ht.n_heads_here;
      a.out[row * q_dim + head * hd + d] = __float2bfloat16(out / sum);
    } else {
      const size_t slot = PartialSlot(item.partial, r, RMAX);
      a.partial_o[slot * hd + d] = out;
      if (d == 0) {
        a.partial_ml[slot * 2] = mx;
        a.partial_ml[slot * 2 + 1] = sum;
      }
    }
  }
}

// Merges the splits of one query tile (blockIdx.x) for one head tile (blockIdx.y).
__global__ void __launch_bounds__(kThreads) CombineKernel(AttentionArgs a, int max_rows) {
  const AttentionCombine c = a.combine[blockIdx.x];
  const HeadTile ht = HeadTileOf(a);
  const int hd = a.head_dim, q_dim = a.n_heads * hd;
  const int rows = c.n_rows * ht.n_heads_here;
  for (int i = threadIdx.x; i < rows * hd; i += kThreads) {
    const int r = i / hd, d = i % hd;
    float mx = kNegInf;
    for (int s = 0; s < c.n_splits; ++s) {
      mx = fmaxf(mx, a.partial_ml[PartialSlot(c.first_partial + s, r, max_rows) * 2]);
    }
    float sum = 0.0f, out = 0.0f;
    for (int s = 0; s < c.n_splits; ++s) {
      const size_t slot = PartialSlot(c.first_partial + s, r, max_rows);
      const float ms = a.partial_ml[slot * 2];
      if (ms == kNegInf) continue;  // no key of this split is visible to row r
      const float f = expf(ms - mx);
      sum = fmaf(a.partial_ml[slot * 2 + 1], f, sum);
      out = fmaf(a.partial_o[slot * hd + d], f, out);
    }
    const int head = ht.first_head + r % ht.n_heads_here;
    const size_t row = c.row0 + r / ht.n_heads_here;
    a.out[row * q_dim + head * hd + d] = __float2bfloat16(out / sum);
  }
}

template <int DL, int RMAX>
cudaError_t Launch(const AttentionArgs& a, int n_items, int n_combine, cudaStream_t stream) {
  const dim3 grid(n_items, a.n_kv_heads * a.head_tiles);
  const size_t loop_floats = RMAX * a.head_dim + kWarps * RMAX * 32;
  const size_t merge_floats = kWarps * RMAX * (a.head_dim + 2);
  const size_t smem = sizeof(float) * (loop_floats > merge_floats ? loop_floats : merge_floats);
  PagedAttentionKernel<DL, RMAX><<<grid, kThreads, smem, stream>>>(a);
  if (n_combine > 0) {
    CombineKernel<<<dim3(n_combine, grid.y), kThreads, 0, stream>>>(a, RMAX);
  }
  return cudaGetLastError();
}

// The kernel for the fewest rows (4, 8 or RMAX) that holds `rows` (<= RMAX).
template <int DL, int RMAX>
cudaError_t LaunchForRows(const AttentionArgs& a, int rows, int n_items, int n_combine,
                          cudaStream_t stream) {
  if (rows <= 4) return Launch<DL, 4>(a, n_items, n_combine, stream);
  if (rows <= 8) return Launch<DL, 8>(a, n_items, n_combine, stream);
  return Launch<DL, RMAX>(a, n_items, n_combine, stream);
}

}  // namespace

cudaError_t LaunchPagedAttention(const AttentionArgs& a, int n_items, int n_combine,
                                 cudaStream_t stream) {
  if (a.head_dim % 2 != 0 || a.head_dim > 256 || a.head_dim < 2 ||
      a.heads_per_tile > AttentionMaxRows(a.head_dim)) {
    return cudaErrorInvalidValue;
  }
  if (n_items <= 0) return cudaGetLastError();
  static_assert(AttentionMaxRows(256) == 8 && AttentionMaxRows(128) == 16);
  const int max_rows = AttentionMaxRows(a.head_dim);
  const int rows = a.tile_rows > 0 ? a.tile_rows : max_rows;
  // Fewer rows than a head tile holds would overrun the kernel's per-row arrays.
  if (rows > max_rows || rows < a.heads_per_tile) return cudaErrorInvalidValue;
  if (DecodeAttentionApplies(a)) return LaunchDecodeAttention(a, n_items, stream);
  if (a.head_dim <= 32) return LaunchForRows<1, 16>(a, rows, n_items, n_combine, stream);
  if (a.head_dim <= 64) return LaunchForRows<2, 16>(a, rows, n_items, n_combine, stream);
  if (a.head_dim <= 128) return LaunchForRows<4, 16>(a, rows, n_items, n_combine, stream);
  return LaunchForRows<8, 8>(a, rows, n_items, n_combine, stream);
}

}  // namespace pdserve::model::cuda
