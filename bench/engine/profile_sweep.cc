#include "bench/engine/profile_sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <random>

#include "model/cuda/cuda_backend.h"
#include "model/engine.h"

namespace pdserve::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string CpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::vector<int32_t> RandomPrompt(std::mt19937& rng, int n, int vocab) {
  std::vector<int32_t> p(n);
  for (auto& t : p) t = static_cast<int32_t>(rng() % vocab);
  return p;
}

// Steps until no work is left, keeping every step that ran prompts only or decode only (a
// mixed step would blur the two fits).
Status RunSteps(model::Engine& engine, std::vector<model::StepSample>* samples) {
  std::vector<model::TokenEvent> events;
  while (engine.HasWork()) {
    events.clear();
    model::StepStats stats;
    PDSERVE_RETURN_IF_ERROR(engine.Step(&events, &stats));
    if ((stats.prompt_tokens > 0) != (stats.decode_tokens > 0)) {
      samples->push_back({stats.shape, stats.seconds});
    }
  }
  return Status::Ok();
}

// "18.51 ms at 1, 23.95 at 2, ... + 0.0022 ms/context token", or "" for no curve.
std::string CurveSummary(const model::MeasuredCurve& c, const char* unit) {
  if (c.empty()) return "";
  std::string points;
  for (const auto& [x, seconds] : c.points) {
    points += fmt::format("{}{:.3f}{} at {}", points.empty() ? "" : ", ", seconds * 1e3,
                          points.empty() ? " ms" : "", x);
  }
  return fmt::format("    as measured: {} + {:.3g} ms/{}\n", points, c.per_context * 1e3, unit);
}

}  // namespace

Result<model::PerformanceProfile> MeasureProfile(const std::string& model_dir,
                                                 const ProfileSweepOptions& o) {
  model::EngineOptions eo;
  eo.device = o.engine.device;
  eo.dtype = o.engine.dtype;
  eo.threads = o.engine.threads;
  eo.page_size = o.page_size;
  eo.max_batch_tokens = o.max_batch_tokens;
  eo.kv_memory_mb = o.kv_memory_mb;
  eo.prefix_cache = false;  // every prompt token computed, as measured
  model::ModelConfig config;
  const auto load_start = Clock::now();
  std::unique_ptr<model::Engine> engine;
  if (!o.engine.random_shape.empty()) {
    PDSERVE_ASSIGN_OR_RETURN(engine, RandomShapeEngine(o.engine, eo, &config));
  } else {
    PDSERVE_ASSIGN_OR_RETURN(config, model::ModelConfig::Load(model_dir));
    PDSERVE_ASSIGN_OR_RETURN(engine, model::Engine::Load(model_dir, eo));
  }
  const double cold_start = std::chrono::duration<double>(Clock::now() - load_start).count();

  std::mt19937 rng(11);
  const int vocab = config.vocab_size;
  model::SamplingParams params;
  params.temperature = 0;
  params.ignore_eos = true;
  std::vector<model::StepSample> samples;
  // Prompt-only steps: one prompt of each length, then two and four of a quarter of it.
  for (int r = 0; r < o.repeats; ++r) {
    for (int len : o.prompt_lens) {
      if (len >= config.max_seq_len || len > o.max_batch_tokens) continue;
      params.max_tokens = 1;
      for (int parts : {1, 2, 4}) {
        if (len / parts < 1) continue;
        for (int i = 0; i < parts; ++i) {
          PDSERVE_RETURN_IF_ERROR(
              engine->Add(RandomPrompt(rng, len / parts, vocab), params).status());
        }
        PDSERVE_RETURN_IF_ERROR(RunSteps(*engine, &samples));
      }
    }
  }
  // Decode steps at each batch size and context (their prefill steps are kept too).
  for (int r = 0; r < o.repeats; ++r) {
    for (int ctx : o.contexts) {
      for (int batch : o.batches) {
        const int per_seq = model::PagesForTokens(ctx + o.decode_steps + 1, eo.page_size);
        if (ctx + o.decode_steps + 1 > config.max_seq_len ||
            per_seq * batch > engine->pages().num_pages()) {
          continue;
        }
        params.max_tokens = o.decode_steps + 1;
        for (int b = 0; b < batch; ++b) {
          PDSERVE_RETURN_IF_ERROR(engine->Add(RandomPrompt(rng, ctx, vocab), params).status());
        }
        PDSERVE_RETURN_IF_ERROR(RunSteps(*engine, &samples));
      }
    }
  }

  model::PerformanceProfile p;
  PDSERVE_RETURN_IF_ERROR(model::FitProfile(samples, &p));
  const bool gpu = eo.device.rfind("cuda", 0) == 0;
  p.device = eo.device;
  p.device_name = CpuName();
  if (gpu) {
    const auto* cuda = dynamic_cast<const model::CudaBackend*>(&engine->backend());
    p.device_name = cuda ? cuda->device_name() : engine->backend().device();
  }
  p.model_id = config.model_id;
  p.model_shape = config.ToJson();
  p.dtype = o.engine.dtype;
  p.threads = o.engine.threads;
  p.command = o.command;
  p.date = UtcNow();
  const model::KvCacheShape& shape = engine->backend().kv_shape();
  p.n_layers = shape.n_layers;
  p.page_size = shape.page_size;
  p.kv_pages = shape.num_pages;
  p.kv_bytes_per_token = static_cast<double>(shape.page_bytes()) * shape.n_layers / shape.page_size;
  p.kv_bytes_per_second = o.kv_gbps * 1e9;
  p.kv_bandwidth_source = o.kv_gbps > 0 ? o.kv_gbps_source : "not measured: transfers take no time";
  p.max_batch_tokens = o.max_batch_tokens;
  p.cold_start_seconds = cold_start;
  return p;
}

std::string ProfileSummary(const model::PerformanceProfile& p) {
  return fmt::format(
      "profile of {} on {} ({}), {} steps measured\n"
      "  prefill step: {:.3f} ms + {:.4f} ms/token + {:.3g} ms/attention pair\n{}"
      "  decode step:  {:.3f} ms + {:.4f} ms/sequence + {:.3g} ms/context token\n{}"
      "  median fit error: prefill {:.1f}%, decode {:.1f}%\n"
      "  measured up to {} prompt tokens a step, batches of {}, contexts of {} tokens\n"
      "  KV {:.0f} bytes/token, {} pages of {}, link {:.2f} GB/s; cold start {:.2f} s\n",
      p.model_id, p.device, p.device_name, p.samples, p.prefill.base * 1e3,
      p.prefill.per_token * 1e3, p.prefill.per_context * 1e3,
      CurveSummary(p.prefill_curve, "attention pair"), p.decode.base * 1e3,
      p.decode.per_token * 1e3, p.decode.per_context * 1e3,
      CurveSummary(p.decode_curve, "context token"), p.prefill_fit_error * 100,
      p.decode_fit_error * 100, p.range.prompt_tokens, p.range.decode_tokens, p.range.max_context,
      p.kv_bytes_per_token, p.kv_pages, p.page_size, p.kv_bytes_per_second / 1e9,
      p.cold_start_seconds);
}

}  // namespace pdserve::bench
