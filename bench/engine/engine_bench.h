// The engine benchmark behind `pdserve bench engine`: prefill and decode throughput at several
// batch sizes, and batch-1 decode against the memory-bandwidth roofline (matrix bytes read per
// token over a bandwidth measured in the same run: a parallel read with the same threads on the
// CPU, a device-to-device copy on a GPU). On a GPU prompt processing is also held against the
// bf16 matrix rate of a large cuBLAS GEMM measured in the same run. Runs on the calling thread;
// takes the whole machine (or device) while it runs.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/engine.h"
#include "model/weights.h"

namespace pdserve::bench {

struct EngineBenchOptions {
  std::vector<int> batches = {1, 8, 32};
  int prompt_len = 128;        // tokens per prompt (random ids)
  int decode_steps = 32;       // timed decode steps per batch size
  int repeats = 3;             // the median of this many runs is reported
  int threads = 0;             // 0: all
  std::string device = "cpu";  // or "cuda:N"
  std::string dtype = "auto";  // the engine's matrix dtype (model::EngineOptions::dtype)
  // CPU: also time batch-1 decode with the matrices in this dtype ("bf16", ...), each run paired
  // with one of the first engine, so their ratio is taken in the same minute of the machine.
  std::string compare_dtype;
  // Instead of a model directory: random bf16 weights shaped like this make-model preset
  // ("llama3-8b", "small", ...), made on the device in moments. Needs a cuda device.
  std::string random_shape;
};

struct EngineBenchResult {
  std::string model_id;
  std::string dtype;
  double params_millions = 0;
  int threads = 0;
  std::string cpu_kernels;  // "avx512" or "avx2" (cpu_matmul.h; PDSERVE_MATMUL_ISA=avx2 pins it)
  double read_gbps = 0;     // parallel streaming read of a buffer larger than the caches (CPU:
                            // the median of reads taken right before each batch-1 run)
  double copy_gbps = 0;     // memcpy, counting bytes read plus bytes written (STREAM's convention)
  // CPU: the threads' FMA peak (fma_probe.h), the median of probes taken right before each
  // batch-1 run; and each batch's decode matrix rate over it (decode tokens/s x 2 x matrix
  // elements per token, the LM head included; attention is not counted).
  double fma_gflops = 0;
  double decode_flops_per_token = 0;
  std::map<int, double> decode_peak_ratio;
  double weight_bytes_per_token = 0;
  std::map<int, double> prefill_tokens_per_s;
  std::map<int, double> decode_tokens_per_s;
  // Median over rounds of each batch's decode tokens/s over batch 1's in the same round (the
  // batch sizes run in turn, round after round). Empty without batch 1.
  std::map<int, double> decode_vs_batch1;
  // Each round's own figures, in the order they ran: on a machine whose speed drifts, they show
  // which state each run caught (a read probe high while decode is not, say).
  struct Round {
    double read_gbps = 0;   // CPU: the read taken right before this round's batch-1 run
    double fma_gflops = 0;  // CPU: likewise the FMA peak
    std::map<int, double> prefill_tokens_per_s, decode_tokens_per_s;
  };
  std::vector<Round> rounds;
  double roofline_tokens_per_s = 0;  // roofline bandwidth / weight bytes per token
  // Batch-1 decode over the roofline. CPU: the median over batch-1 runs of each run's tokens/s
  // over the roofline of the read measured right before it (a machine whose bandwidth drifts
  // from minute to minute then compares like with like).
  double roofline_ratio = 0;
  // compare_dtype: batch-1 decode with the matrices in that dtype, and the median over paired
  // runs of its tokens/s over the first engine's.
  std::string compare_dtype;
  double compare_decode_tokens_per_s = 0;
  double compare_base_tokens_per_s = 0;  // the first engine in those pairs
  double compare_ratio = 0;
  // GPU runs (device "cuda:N"): the roofline's bandwidth is copy_gbps, and prompt processing is
  // compared with a bf16 GEMM's rate. Prefill FLOPs per token: 2 x the layers' matrix
  // parameters (the LM head runs for one token per prompt; attention is not counted).
  std::string device = "cpu";
  std::string device_name;
  double matmul_tflops = 0;  // 8192^3 bf16 cuBLAS GEMM
  double prefill_flops_per_token = 0;
  double prefill_tflops = 0;      // the best batch's prefill tokens/s x FLOPs per token
  double prefill_peak_ratio = 0;  // prefill_tflops / matmul_tflops

  nlohmann::json ToJson() const;
  std::string ToTable() const;
};

// Memory bandwidth with `threads` threads over buffers of `bytes` (made once, reused, in huge
// pages like the CPU backend's packed weights).
class MemoryBandwidthProbe {
 public:
  MemoryBandwidthProbe(int threads, size_t bytes);
  // Best of `passes` rounds of parallel reads of the whole buffer, each thread reading its share
  // as 1, 2 and 4 sequential streams side by side (more streams a core read faster on some
  // machines; docs/benchmarks.md, Roofline and read probe).
  double ReadGbps(int passes);
  double CopyGbps(int passes);  // best of `passes` memcpy; bytes read plus bytes written

 private:
  double ReadOnceGbps(int streams);

  int threads_;
  size_t n_;  // floats in each buffer
  // In huge pages, like the packed weights the roofline holds the engine against.
  std::shared_ptr<void> src_buffer_, dst_buffer_;
  float* src_;
  float* dst_;
};

// An engine on a CUDA backend with random bf16 weights of the make-model preset
// o.random_shape, made on the device; its config in *config.
Result<std::unique_ptr<model::Engine>> RandomShapeEngine(const EngineBenchOptions& o,
                                                         const model::EngineOptions& eo,
                                                         model::ModelConfig* config);

Result<EngineBenchResult> RunEngineBench(const std::string& model_dir,
                                         const EngineBenchOptions& options);

}  // namespace pdserve::bench
