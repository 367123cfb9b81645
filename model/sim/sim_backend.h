// SimBackend: a Backend (model/backend.h) that computes nothing and takes, for each step, the
// time its performance profile (model/performance_profile.h) predicts for the step's work, so
// that the real engine, scheduler, page pool, workers and gateway run at a profiled device's
// speed on a machine without it (device "sim:PROFILE"; `pdserve sim` hosts hundreds).
// - Tokens: the next token after each logit row is a hash of the row's token and position (one
//   of the tokenizer's text tokens), so a request's tokens are fixed by its prompt (and equal
//   across runs, workers and resumptions);
//   sampled rows get one-hot logits, so a seed changes nothing. A request ends at max_tokens, or
//   where the hash lands on an end-of-sequence id, as a real model's would.
// - KV: the pages hold no values. The KV shape is cut to one head of one value per token (the
//   real transport code moves small pages), and simulated_kv() says what the real model's KV
//   would weigh and how fast the profile's link moves it, so a transport can take that long.
//   The pool's memory is reserved, not committed: only pages a transfer writes become resident.
// - Where the profile has a spread (PerformanceProfile::prefill_spread, decode_spread), each
//   step's time is multiplied by a factor drawn from it, from a fixed sequence per backend.
// - A decode-only step right after a step with decode work ends no sooner than the profile's
//   decode_gap_seconds plus its own time after that step ended: a real worker's time between
//   steps (sending tokens, reading messages), of which this process spends less.
// - A step outside the profile's measured range is run at the extrapolated time and logged, once
//   per kind of excess, so that a figure beyond the profile is never taken silently.
// - Faults (SimFaults): fail (every step from then on fails), freeze (the step blocks until
//   released), slow (steps take longer by a factor).
// Driven by one thread, like every Backend.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/backend.h"
#include "model/performance_profile.h"

namespace pdserve::model {

// Fault injection, shared by the backends of a `pdserve sim` process and its command. Safe to
// use from any thread.
struct SimFaults {
  using Clock = std::chrono::steady_clock;
  Clock::time_point fail_at = Clock::time_point::max();
  Clock::time_point freeze_at = Clock::time_point::max();

  // Ends every freeze: a frozen step returns Unavailable (the process is stopping).
  void Release();
  // Blocks until Release; true when released.
  void WaitForRelease();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

struct SimBackendOptions {
  PerformanceProfile profile;
  int page_size = 16;
  int num_pages = 0;                  // 0: the profile's pages (scaled to page_size)
  double slow_factor = 1.0;           // every step takes this many times the profile's time; > 0
  std::shared_ptr<SimFaults> faults;  // null: none
  // The ids a step may emit: the tokenizer's text tokens (not special, not empty), so that
  // every token shows as text as a trained model's would. Empty: any id of the vocabulary.
  std::shared_ptr<const std::vector<int32_t>> output_ids;
};

// `config` is the served model's (its vocabulary, context, layers and end-of-sequence ids).
Result<std::unique_ptr<Backend>> CreateSimBackend(const ModelConfig& config,
                                                  const SimBackendOptions& options);

// The text token ids of the tokenizer in `model_dir` (SimBackendOptions::output_ids), read once
// per directory and process; null when it has no tokenizer that loads.
std::shared_ptr<const std::vector<int32_t>> TextTokenIds(const std::string& model_dir);

// "sim:PROFILE" -> PROFILE; InvalidArgument for anything else.
Result<std::string> ParseSimDevice(const std::string& device);

}  // namespace pdserve::model
