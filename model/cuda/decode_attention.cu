// The decode attention kernel (kernels.h, LaunchDecodeAttention): attention of one-token items
// (decode rows) over the paged KV, with the splits of a key range merged by the last of their
// blocks instead of a second kernel. At batch 1 a layer's attention reads a few hundred KiB, so
// its time is a chain of memory latencies, not bandwidth, which the general kernel
// (attention.cu), one warp walking 32 keys with a few loads in flight, serves poorly
// (docs/benchmarks.md, CUDA engine). Here every thread of the block loads its share of a
// chunk's keys and values at once, so a chunk costs about three latencies: the page table, the
// K and V rows, and the block's softmax.
//
// Layout: L lanes hold a key's head_dim (8 dimensions, one 16-byte load, a lane), so a pass of
// the block's 128 threads covers 128 / L keys and a chunk U passes. A lane's partial dot
// products are summed over its L lanes by shuffles; the block's softmax runs on the chunk's
// scores in shared memory (a warp per row, a lane per key), and each thread accumulates P·V for
// its dimensions and keys, summed over the key slots at the end. The maths is the CPU backend's:
// q·k / sqrt(head_dim), softmax, weighted sum of V, in f32 from bf16 pages.
#include "model/cuda/attention_device.cuh"
#include "model/cuda/device_math.cuh"
#include "model/cuda/kernels.h"

namespace pdserve::model::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

// L lanes a key (head_dim <= 8 L), R rows (query heads of the tile, rounded up).
template <int L, int R>
struct DecodeShape {
  static constexpr int kKeysPerPass = kThreads / L;
  static constexpr int kPasses = (32 / kKeysPerPass) < 4 ? (32 / kKeysPerPass) : 4;
  static constexpr int kChunk = kKeysPerPass * kPasses;  // keys a chunk: 32, or 16 for L = 32
  static constexpr int kRowsPerWarp = (R + kWarps - 1) / kWarps;
  static_assert(kChunk <= 32, "the softmax takes a lane a key");
};

__device__ __forceinline__ float Dot8(const float (&q)[8], const uint4& raw) {
  float k[8];
  Unpack8(raw, k);
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) acc = fmaf(q[i], k[i], acc);
  return acc;
}

template <int L, int R>
__global__ void __launch_bounds__(kThreads) DecodeAttentionKernel(AttentionArgs a) {
  using S = DecodeShape<L, R>;
  constexpr int KP = S::kKeysPerPass, U = S::kPasses, C = S::kChunk;
  __shared__ float p_s[2][R][C];  // a chunk's scores, then probabilities; two chunks alternate
  __shared__ float alpha_s[2][R];
  __shared__ float ml_s[R][2];
  __shared__ int last_split_s;
  extern __shared__ float4 smem4[];
  float* o_s = reinterpret_cast<float*>(smem4);  // [KP][R][head_dim]

  const AttentionItem item = a.items[blockIdx.x];
  const HeadTile ht = HeadTileOf(a);
  const int hd = a.head_dim, ps = a.page_size;
  const int rows = ht.n_heads_here;  // the item is one token: a row per query head
  const int q_dim = a.n_heads * hd, kv_dim = a.n_kv_heads * hd;
  const size_t page_stride = 2ull * ps * kv_dim;
  const size_t value_offset = static_cast<size_t>(ps) * kv_dim;
  const int32_t* table = a.tables + item.table;
  const bf16* kv_head = a.kv + static_cast<size_t>(ht.kv_head) * hd;
  const int slot = threadIdx.x / L, d0 = (threadIdx.x % L) * 8;
  const bool has_dims = d0 < hd;  // head_dim is a multiple of 8
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  float q[R][8];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float4 lo = {0, 0, 0, 0}, hi = {0, 0, 0, 0};
    if (r < rows && has_dims) {
      const float* src =
          a.q + static_cast<size_t>(item.row0) * q_dim + (ht.first_head + r) * hd + d0;
      lo = *reinterpret_cast<const float4*>(src);
      hi = *reinterpret_cast<const float4*>(src + 4);
    }
    q[r][0] = lo.x, q[r][1] = lo.y, q[r][2] = lo.z, q[r][3] = lo.w;
    q[r][4] = hi.x, q[r][5] = hi.y, q[r][6] = hi.z, q[r][7] = hi.w;
  }
  float o[R][8];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int i = 0; i < 8; ++i) o[r][i] = 0.0f;
  }
  // Running max and sum of the rows this warp's softmax owns: warp + kWarps * j.
  float m_own[S::kRowsPerWarp], l_own[S::kRowsPerWarp];
#pragma unroll
  for (int j = 0; j < S::kRowsPerWarp; ++j) {
    m_own[j] = kNegInf;
    l_own[j] = 0.0f;
  }

  int buf = 0;
  for (int c0 = item.key_begin; c0 < item.key_end; c0 += C, buf ^= 1) {
    uint4 kr[U], vr[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int key = c0 + slot + KP * u;
      kr[u] = vr[u] = uint4{0, 0, 0, 0};
      if (key < item.key_end && has_dims) {
        const size_t row = static_cast<size_t>(table[key / ps]) * page_stride +
                           static_cast<size_t>(key % ps) * kv_dim + d0;
        kr[u] = __ldg(reinterpret_cast<const uint4*>(kv_head + row));
        vr[u] = __ldg(reinterpret_cast<const uint4*>(kv_head + row + value_offset));
      }
    }
    // Scores: a lane's 8 dimensions, summed over the key's L lanes.
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int key = c0 + slot + KP * u;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float s = Dot8(q[r], kr[u]);
#pragma unroll
        for (int offset = L / 2; offset > 0; offset >>= 1) {
          s += __shfl_xor_sync(0xffffffffu, s, offset, L);
        }
        if (d0 == 0) p_s[buf][r][slot + KP * u] = key < item.key_end ? s * a.scale : kNegInf;
      }
    }
    __syncthreads();
    // Online softmax, a warp a row and a lane a key; the chunk has at least one key, so the
    // new max is finite and a masked key's probability is exp(-inf) = 0.
#pragma unroll
    for (int j = 0; j < S::kRowsPerWarp; ++j) {
      const int r = warp + kWarps * j;
      if (r < R) {
        const float s = lane < C ? p_s[buf][r][lane] : kNegInf;
        const float m_new = fmaxf(m_own[j], WarpMax(s));
        const float p = expf(s - m_new);
        const float alpha = expf(m_own[j] - m_new);  // 0 before the first chunk
        l_own[j] = l_own[j] * alpha + WarpSum(p);
        m_own[j] = m_new;
        if (lane < C) p_s[buf][r][lane] = p;
        if (lane == 0) alpha_s[buf][r] = alpha;
      }
    }
    __syncthreads();
    // P·V for this thread's keys and dimensions. The next chunk writes the other buffer, and
    // the one after this buffer only past its own first barrier, when these reads are done.
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float alpha = alpha_s[buf][r];
#pragma unroll
      for (int i = 0; i < 8; ++i) o[r][i] *= alpha;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float v[8];
      Unpack8(vr[u], v);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float p = p_s[buf][r][slot + KP * u];
#pragma unroll
        for (int i = 0; i < 8; ++i) o[r][i] = fmaf(p, v[i], o[r][i]);
      }
    }
  }

  // Sum the key slots' outputs; the softmax warps publish their rows' max and sum.
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < rows && has_dims) {
      float* dst = o_s + (slot * R + r) * hd + d0;
      *reinterpret_cast<float4*>(dst) = make_float4(o[r][0], o[r][1], o[r][2], o[r][3]);
      *reinterpret_cast<float4*>(dst + 4) = make_float4(o[r][4], o[r][5], o[r][6], o[r][7]);
    }
  }
#pragma unroll
  for (int j = 0; j < S::kRowsPerWarp; ++j) {
    const int r = warp + kWarps * j;
    if (r < R && lane == 0) {
      ml_s[r][0] = m_own[j];
      ml_s[r][1] = l_own[j];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < rows * hd; i += kThreads) {
    const int r = i / hd, d = i % hd;
    float out = 0.0f;
#pragma unroll
    for (int k = 0; k < KP; ++k) out += o_s[(k * R + r) * hd + d];
    if (item.partial < 0) {
      a.out[static_cast<size_t>(item.row0) * q_dim + (ht.first_head + r) * hd + d] =
          __float2bfloat16(out / ml_s[r][1]);
    } else {
      const size_t slot_index = PartialSlot(item.partial, r, R);
      a.partial_o[slot_index * hd + d] = out;
      if (d == 0) {
        a.partial_ml[slot_index * 2] = ml_s[r][0];
        a.partial_ml[slot_index * 2 + 1] = ml_s[r][1];
      }
    }
  }
  if (item.partial < 0) return;

  // The last block of the tile's splits to finish merges them (the threadFenceReduction
  // pattern): each block makes its partial visible, then counts itself done.
  __threadfence();
  __syncthreads();
  int* counter = a.split_counters + static_cast<size_t>(item.combine) * gridDim.y + blockIdx.y;
  const AttentionCombine c = a.combine[item.combine];
  if (threadIdx.x == 0) {
    const int done = atomicAdd(counter, 1) + 1;
    last_split_s = done == c.n_splits;
    if (last_split_s) atomicExch(counter, 0);  // ready for the next launch
  }
  __syncthreads();
  if (!last_split_s) return;
  __threadfence();
  for (int i = threadIdx.x; i < rows * hd; i += kThreads) {
    const int r = i / hd, d = i % hd;
    float mx = kNegInf;
    for (int s = 0; s < c.n_splits; ++s) {
      mx = fmaxf(mx, __ldcg(a.partial_ml + PartialSlot(c.first_partial + s, r, R) * 2));
    }
    float sum = 0.0f, out = 0.0f;
    for (int s = 0; s < c.n_splits; ++s) {
      const size_t slot_index = PartialSlot(c.first_partial + s, r, R);
      const float f = expf(__ldcg(a.partial_ml + slot_index * 2) - mx);  // every split has keys
      sum = fmaf(__ldcg(a.partial_ml + slot_index * 2 + 1), f, sum);
      out = fmaf(__ldcg(a.partial_o + slot_index * hd + d), f, out);
    }
    a.out[static_cast<size_t>(c.row0) * q_dim + (ht.first_head + r) * hd + d] =
        __float2bfloat16(out / sum);
  }
}

template <int L, int R>
cudaError_t Launch(const AttentionArgs& a, int n_items, cudaStream_t stream) {
  const dim3 grid(n_items, a.n_kv_heads * a.head_tiles);
  const size_t smem = sizeof(float) * DecodeShape<L, R>::kKeysPerPass * R * a.head_dim;
  DecodeAttentionKernel<L, R><<<grid, kThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

template <int L>
cudaError_t LaunchForRows(const AttentionArgs& a, int n_items, cudaStream_t stream) {
  if (a.heads_per_tile <= 1) return Launch<L, 1>(a, n_items, stream);
  if (a.heads_per_tile <= 2) return Launch<L, 2>(a, n_items, stream);
  if (a.heads_per_tile <= 4) return Launch<L, 4>(a, n_items, stream);
  return Launch<L, 8>(a, n_items, stream);
}

}  // namespace

bool DecodeAttentionApplies(const AttentionArgs& a) {
  return a.tile_rows == a.heads_per_tile && a.heads_per_tile >= 1 && a.heads_per_tile <= 8 &&
         a.head_dim % 8 == 0 && a.head_dim >= 8 && a.head_dim <= 256 && a.split_counters != nullptr;
}

cudaError_t LaunchDecodeAttention(const AttentionArgs& a, int n_items, cudaStream_t stream) {
  if (!DecodeAttentionApplies(a)) return cudaErrorInvalidValue;
  if (n_items <= 0) return cudaGetLastError();
  if (a.head_dim <= 64) return LaunchForRows<8>(a, n_items, stream);
  if (a.head_dim <= 128) return LaunchForRows<16>(a, n_items, stream);
  return LaunchForRows<32>(a, n_items, stream);
}

}  // namespace pdserve::model::cuda
