// The engine benchmark behind `pdserve bench engine`: prefill and decode throughput at several
// batch sizes, and batch-1 decode against the memory-bandwidth roofline (matrix bytes read per
// token over a read bandwidth measured in the same run, with the same threads). Runs on the
// calling thread; takes the whole machine while it runs.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/engine.h"
#include "model/weights.h"

namespace pdserve::model {

struct EngineBenchOptions {
  std::vector<int> batches = {1, 8, 32};
  int prompt_len = 128;   // tokens per prompt (random ids)
  int decode_steps = 32;  // timed decode steps per batch size
  int repeats = 3;        // the median of this many runs is reported
  int threads = 0;        // 0: all
  std::string device = "cpu";
};

struct EngineBenchResult {
  std::string model_id;
  std::string dtype;
  double params_millions = 0;
  int threads = 0;
  double read_gbps = 0;  // parallel streaming read of a buffer larger than the caches
  double copy_gbps = 0;  // memcpy, counting bytes read plus bytes written (STREAM's convention)
  double weight_bytes_per_token = 0;
  std::map<int, double> prefill_tokens_per_s;
  std::map<int, double> decode_tokens_per_s;
  double roofline_tokens_per_s = 0;  // read_gbps / weight bytes per token
  double roofline_ratio = 0;         // batch-1 decode over the roofline

  nlohmann::json ToJson() const;
  std::string ToTable() const;
};

// Measures memory bandwidth with `threads` threads: {read GB/s, copy GB/s}, best of several.
std::pair<double, double> MeasureMemoryBandwidth(int threads, size_t bytes);

Result<EngineBenchResult> RunEngineBench(const std::string& model_dir,
                                         const EngineBenchOptions& options);

}  // namespace pdserve::model
