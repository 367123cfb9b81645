#include "bench/engine/engine_bench.h"

#include <immintrin.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "bench/engine/fma_probe.h"
#include "common/percentile.h"
#include "model/backend_factory.h"
#include "model/cpu_matmul.h"
#include "model/cuda/cuda_backend.h"
#include "model/huge_pages.h"
#include "model/model_maker.h"
#include "tokenizer/tokenizer_writer.h"

namespace pdserve::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One timed run at one batch size: {prefill tokens/s, decode tokens/s}.
Result<std::pair<double, double>> RunBatch(model::Engine& engine, int batch,
                                           const EngineBenchOptions& o, uint32_t seed) {
  std::mt19937 rng(seed);
  model::SamplingParams params;
  params.temperature = 0;
  params.ignore_eos = true;
  params.max_tokens = o.decode_steps + 1;
  for (int b = 0; b < batch; ++b) {
    std::vector<int32_t> prompt(o.prompt_len);
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % engine.config().vocab_size);
    auto id = engine.Add(std::move(prompt), params);
    if (!id.ok()) return id.status();
  }
  std::vector<model::TokenEvent> events;
  // Prefill: steps until every sequence has its first token.
  int first_tokens = 0;
  const auto t0 = Clock::now();
  while (first_tokens < batch) {
    events.clear();
    PDSERVE_RETURN_IF_ERROR(engine.Step(&events));
    first_tokens += static_cast<int>(events.size());
  }
  const auto t1 = Clock::now();
  int decoded = 0;
  while (engine.HasWork()) {
    events.clear();
    PDSERVE_RETURN_IF_ERROR(engine.Step(&events));
    decoded += static_cast<int>(events.size());
  }
  const auto t2 = Clock::now();
  return std::pair{batch * o.prompt_len / Seconds(t0, t1), decoded / Seconds(t1, t2)};
}

}  // namespace

MemoryBandwidthProbe::MemoryBandwidthProbe(int threads, size_t bytes)
    : threads_(threads),
      n_(bytes / sizeof(float) / 64 * 64),
      src_buffer_(model::AllocateHugePageBuffer(n_ * sizeof(float))),
      dst_buffer_(model::AllocateHugePageBuffer(n_ * sizeof(float))),
      src_(static_cast<float*>(src_buffer_.get())),
      dst_(static_cast<float*>(dst_buffer_.get())) {
  std::fill_n(src_, n_, 1.0f);
  std::fill_n(dst_, n_, 0.0f);
}

double MemoryBandwidthProbe::ReadGbps(int passes) {
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    for (int streams : {1, 2, 4}) best = std::max(best, ReadOnceGbps(streams));
  }
  return best;
}

double MemoryBandwidthProbe::ReadOnceGbps(int streams) {
  const float* src = src_;
  const size_t per_stream = n_ / threads_ / streams / 64 * 64;  // floats, whole 256-byte blocks
  float total = 0;
  const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads_) reduction(+ : total)
  {
    const size_t first = static_cast<size_t>(omp_get_thread_num()) * streams;
    __m256 sum = _mm256_setzero_ps();
    for (size_t i = 0; i < per_stream; i += 64) {
      for (int s = 0; s < streams; ++s) {
        const float* p = src + (first + s) * per_stream + i;
        const __m256 a = _mm256_add_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8));
        const __m256 b = _mm256_add_ps(_mm256_loadu_ps(p + 16), _mm256_loadu_ps(p + 24));
        const __m256 c = _mm256_add_ps(_mm256_loadu_ps(p + 32), _mm256_loadu_ps(p + 40));
        const __m256 d = _mm256_add_ps(_mm256_loadu_ps(p + 48), _mm256_loadu_ps(p + 56));
        sum = _mm256_add_ps(sum, _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
      }
    }
    total += _mm256_cvtss_f32(sum);
  }
  const auto t1 = Clock::now();
  if (total == -1.0f) std::fputs("", stderr);  // keeps the reads from being optimised away
  const size_t bytes = per_stream * streams * threads_ * sizeof(float);
  return bytes / Seconds(t0, t1) / 1e9;
}

double MemoryBandwidthProbe::CopyGbps(int passes) {
  const size_t n = n_;
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads_)
    {
      const size_t parts = omp_get_num_threads(), id = omp_get_thread_num();
      const size_t begin = n * id / parts, end = n * (id + 1) / parts;
      std::memcpy(&dst_[begin], &src_[begin], (end - begin) * sizeof(float));
    }
    const auto t1 = Clock::now();
    best = std::max(best, 2.0 * n * sizeof(float) / Seconds(t0, t1) / 1e9);
  }
  return best;
}

namespace {

// Elements of the matrices one token reads: every layer's projections and the LM head.
double MatrixElementsPerToken(const model::ModelConfig& c, bool with_lm_head) {
  const double layer = static_cast<double>(c.dim) * (2.0 * c.q_dim() + 2.0 * c.kv_dim()) +
                       3.0 * c.dim * static_cast<double>(c.hidden_dim);
  return layer * c.n_layers + (with_lm_head ? static_cast<double>(c.vocab_size) * c.dim : 0.0);
}

// Parameters of a model of this shape, as a checkpoint would hold them.
double ParameterCount(const model::ModelConfig& c) {
  const double embed = static_cast<double>(c.vocab_size) * c.dim;
  const double vectors =
      c.n_layers * (2.0 * c.dim + (c.attention_bias ? c.q_dim() + 2.0 * c.kv_dim() : 0.0)) + c.dim;
  return MatrixElementsPerToken(c, !c.tie_word_embeddings) + embed + vectors;
}

}  // namespace

// An engine on a CUDA backend with random weights of a make-model preset's shape.
Result<std::unique_ptr<model::Engine>> RandomShapeEngine(const EngineBenchOptions& o,
                                                         const model::EngineOptions& eo,
                                                         model::ModelConfig* config) {
  PDSERVE_ASSIGN_OR_RETURN(*config, model::PresetConfig(o.random_shape));
  config->vocab_size =
      std::max(config->vocab_size, (tokenizer::kByteLevelMinVocabSize + 63) / 64 * 64);
  config->model_id = "random-" + o.random_shape;
  config->dtype = model::DType::kBF16;
  model::CudaBackendOptions cuda;
  PDSERVE_ASSIGN_OR_RETURN(cuda.device, model::ParseCudaDevice(o.device));
  cuda.num_pages = model::KvPages(*config, eo, model::DType::kBF16);
  cuda.page_size = eo.page_size;
  cuda.random_weights_seed = 1;
  PDSERVE_ASSIGN_OR_RETURN(auto backend, model::CreateCudaBackend(nullptr, *config, cuda));
  return std::make_unique<model::Engine>(std::move(backend), eo);
}

Result<EngineBenchResult> RunEngineBench(const std::string& model_dir,
                                         const EngineBenchOptions& o) {
  if (o.batches.empty() || o.prompt_len < 1 || o.decode_steps < 1 || o.repeats < 1) {
    return InvalidArgument("bench engine needs batches, prompt_len, decode_steps and repeats >= 1");
  }
  const bool cuda = o.device != "cpu";
  if (!o.random_shape.empty() && !cuda) {
    return InvalidArgument("--random-shape makes its weights on a GPU: it needs --device cuda:N");
  }
  if (!o.compare_dtype.empty() && (cuda || !o.random_shape.empty())) {
    return InvalidArgument("--compare-dtype is for the cpu: a GPU holds its weights in bf16");
  }
  const int max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  model::EngineOptions eo;
  eo.device = o.device;
  eo.dtype = o.dtype;
  eo.threads = o.threads;
  eo.max_running = max_batch;
  eo.max_batch_tokens = max_batch * o.prompt_len;
  eo.prefix_cache = false;  // every prompt token computed, as measured
  const int tokens_per_seq = o.prompt_len + o.decode_steps + 1;
  eo.num_pages = max_batch * model::PagesForTokens(tokens_per_seq, eo.page_size) + 1;

  EngineBenchResult r;
  r.device = o.device;
  model::ModelConfig config;
  std::unique_ptr<model::Engine> engine;
  if (!o.random_shape.empty()) {
    PDSERVE_ASSIGN_OR_RETURN(engine, RandomShapeEngine(o, eo, &config));
    r.dtype = "bf16";
    r.params_millions = ParameterCount(config) / 1e6;
  } else {
    PDSERVE_ASSIGN_OR_RETURN(config, model::ModelConfig::Load(model_dir));
    PDSERVE_ASSIGN_OR_RETURN(engine, model::Engine::Load(model_dir, eo));
    auto weights =
        model::Weights::Load(model_dir, config);  // cheap: a second map of the same files
    if (!weights.ok()) return weights.status();
    // A GPU holds every matrix in bf16, whatever the file's dtype.
    r.dtype = cuda                ? "bf16"
              : o.dtype != "auto" ? o.dtype
                                  : std::string(model::DTypeName((*weights)->layers[0].wq.dtype));
    double params = 0;
    for (const auto& f : (*weights)->files)
      for (const auto& [name, t] : f->tensors()) params += static_cast<double>(t.numel());
    r.params_millions = params / 1e6;
  }
  if (tokens_per_seq > config.max_seq_len)
    return OutOfRange("prompt_len + decode_steps exceed the context");
  r.model_id = config.model_id;
  const size_t weight_bytes = cuda ? 2 : model::DTypeSize(*model::ParseDType(r.dtype));
  r.weight_bytes_per_token = MatrixElementsPerToken(config, true) * weight_bytes;
  r.prefill_flops_per_token = 2.0 * MatrixElementsPerToken(config, false);
  r.decode_flops_per_token = 2.0 * MatrixElementsPerToken(config, true);
  r.cpu_kernels = model::MatMulIsaName(model::ActiveMatMulIsa());
  r.threads = o.threads > 0 ? o.threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  PDSERVE_RETURN_IF_ERROR(RunBatch(*engine, 1, o, 1).status());  // warm-up: caches, page faults
  if (cuda) {
    // After the warm-up, so that the GPU's clocks are up for the peaks as for the runs.
    PDSERVE_ASSIGN_OR_RETURN(int device, model::ParseCudaDevice(o.device));
    PDSERVE_ASSIGN_OR_RETURN(model::CudaPeaks peaks, model::MeasureCudaPeaks(device));
    r.device_name = peaks.device_name;
    r.copy_gbps = peaks.copy_gbps;
    r.matmul_tflops = peaks.bf16_tflops;
  }
  std::optional<MemoryBandwidthProbe> probe;
  if (!cuda) {
    // A buffer at least four times the last-level cache and the weights' size.
    probe.emplace(r.threads,
                  std::max<size_t>(512u << 20, static_cast<size_t>(r.weight_bytes_per_token) * 2));
    r.copy_gbps = probe->CopyGbps(5);
  }
  // Batch sizes take turns, one run each per round, so a slow spell of the machine spreads over
  // all of them, and each round's runs are compared with its batch-1 run.
  for (int rep = 0; rep < o.repeats; ++rep) {
    EngineBenchResult::Round& round = r.rounds.emplace_back();
    for (int batch : o.batches) {
      // Batch 1 is held against the bandwidth of the same moment (the probe's reads are short).
      if (probe && batch == 1) {
        round.read_gbps = probe->ReadGbps(3);
        round.fma_gflops = FmaPeakGflops(r.threads, model::ActiveMatMulIsa());
      }
      PDSERVE_ASSIGN_OR_RETURN(auto tps, RunBatch(*engine, batch, o, 100 + rep));
      round.prefill_tokens_per_s[batch] = tps.first;
      round.decode_tokens_per_s[batch] = tps.second;
    }
  }
  // The summary: medians over the rounds, of figures and of ratios within a round.
  auto median_over_rounds = [&](auto figure) {
    std::vector<double> values;
    for (const EngineBenchResult::Round& round : r.rounds) {
      if (const double v = figure(round); v > 0) values.push_back(v);
    }
    return Median(std::move(values));  // 0 for none
  };
  auto decode_of = [](const EngineBenchResult::Round& round, int batch) {
    auto it = round.decode_tokens_per_s.find(batch);
    return it == round.decode_tokens_per_s.end() ? 0.0 : it->second;
  };
  for (int batch : o.batches) {
    r.prefill_tokens_per_s[batch] =
        median_over_rounds([&](const auto& round) { return round.prefill_tokens_per_s.at(batch); });
    r.decode_tokens_per_s[batch] =
        median_over_rounds([&](const auto& round) { return decode_of(round, batch); });
    const double vs_batch1 = median_over_rounds([&](const auto& round) {
      const double batch1 = decode_of(round, 1);
      return batch1 > 0 ? decode_of(round, batch) / batch1 : 0.0;
    });
    if (vs_batch1 > 0) r.decode_vs_batch1[batch] = vs_batch1;
  }
  if (cuda) {
    r.roofline_tokens_per_s = r.copy_gbps * 1e9 / r.weight_bytes_per_token;
    if (r.decode_tokens_per_s.count(1))
      r.roofline_ratio = r.decode_tokens_per_s[1] / r.roofline_tokens_per_s;
  } else {
    // Without a batch-1 run, no round took a probe: take one now.
    r.read_gbps = median_over_rounds([](const auto& round) { return round.read_gbps; });
    if (r.read_gbps == 0) r.read_gbps = probe->ReadGbps(5);
    r.fma_gflops = median_over_rounds([](const auto& round) { return round.fma_gflops; });
    if (r.fma_gflops == 0) r.fma_gflops = FmaPeakGflops(r.threads, model::ActiveMatMulIsa());
    for (auto [batch, tps] : r.decode_tokens_per_s) {
      r.decode_peak_ratio[batch] = tps * r.decode_flops_per_token / (r.fma_gflops * 1e9);
    }
    r.roofline_tokens_per_s = r.read_gbps * 1e9 / r.weight_bytes_per_token;
    r.roofline_ratio = median_over_rounds([&](const auto& round) {
      return round.read_gbps > 0
                 ? decode_of(round, 1) / (round.read_gbps * 1e9 / r.weight_bytes_per_token)
                 : 0.0;
    });
  }

  if (!o.compare_dtype.empty()) {
    model::EngineOptions other = eo;
    other.dtype = o.compare_dtype;
    PDSERVE_ASSIGN_OR_RETURN(auto compared, model::Engine::Load(model_dir, other));
    PDSERVE_RETURN_IF_ERROR(RunBatch(*compared, 1, o, 1).status());  // warm-up
    std::vector<double> base, with, ratios;
    for (int rep = 0; rep < o.repeats; ++rep) {
      // Alternate which goes first, so a drift in the machine's speed favours neither.
      double a = 0, b = 0;
      for (int turn = 0; turn < 2; ++turn) {
        const bool first_engine = (turn == 0) == (rep % 2 == 0);
        PDSERVE_ASSIGN_OR_RETURN(auto tps,
                                 RunBatch(first_engine ? *engine : *compared, 1, o, 200 + rep));
        (first_engine ? a : b) = tps.second;
      }
      base.push_back(a);
      with.push_back(b);
      ratios.push_back(b / a);
    }
    r.compare_dtype = o.compare_dtype;
    r.compare_base_tokens_per_s = Median(base);
    r.compare_decode_tokens_per_s = Median(with);
    r.compare_ratio = Median(ratios);
  }
  if (cuda) {
    double best = 0;
    for (auto [b, tps] : r.prefill_tokens_per_s) best = std::max(best, tps);
    r.prefill_tflops = best * r.prefill_flops_per_token / 1e12;
    if (r.matmul_tflops > 0) r.prefill_peak_ratio = r.prefill_tflops / r.matmul_tflops;
  }
  return r;
}

nlohmann::json EngineBenchResult::ToJson() const {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  char date[32];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  nlohmann::json prefill = nlohmann::json::object(), decode = nlohmann::json::object();
  for (auto [b, v] : prefill_tokens_per_s) prefill[std::to_string(b)] = v;
  for (auto [b, v] : decode_tokens_per_s) decode[std::to_string(b)] = v;
  nlohmann::json vs_batch1 = nlohmann::json::object();
  for (auto [b, v] : decode_vs_batch1) vs_batch1[std::to_string(b)] = v;
  nlohmann::json peak_ratio = nlohmann::json::object();
  for (auto [b, v] : decode_peak_ratio) peak_ratio[std::to_string(b)] = v;
  nlohmann::json round_list = nlohmann::json::array();
  for (const Round& round : rounds) {
    nlohmann::json p = nlohmann::json::object(), d = nlohmann::json::object();
    for (auto [b, v] : round.prefill_tokens_per_s) p[std::to_string(b)] = v;
    for (auto [b, v] : round.decode_tokens_per_s) d[std::to_string(b)] = v;
    nlohmann::json entry = {{"prefill_tokens_per_s", p}, {"decode_tokens_per_s", d}};
    if (round.read_gbps > 0) {
      entry["read_gbps"] = round.read_gbps;
      entry["fma_gflops"] = round.fma_gflops;
    }
    round_list.push_back(std::move(entry));
  }
  return {{"date", date},
          {"host", host},
          {"model", model_id},
          {"dtype", dtype},
          {"params_millions", params_millions},
          {"device", device},
          {"device_name", device_name},
          {"threads", threads},
          {"cpu_kernels", cpu_kernels},
          {"read_gbps", read_gbps},
          {"copy_gbps", copy_gbps},
          {"fma_gflops", fma_gflops},
          {"decode_flops_per_token", decode_flops_per_token},
          {"decode_peak_ratio", peak_ratio},
          {"weight_bytes_per_token", weight_bytes_per_token},
          {"prefill_tokens_per_s", prefill},
          {"decode_tokens_per_s", decode},
          {"decode_vs_batch1", vs_batch1},
          {"decode_vs_batch1_method",
           "median over rounds (each batch size runs once per round) of its tokens/s over batch "
           "1's in the same round"},
          {"rounds", round_list},
          {"roofline_tokens_per_s", roofline_tokens_per_s},
          {"roofline_ratio", roofline_ratio},
          {"roofline_method", device == "cpu" ? "median over batch-1 runs of tokens/s over the "
                                                "roofline of a read taken right before each run"
                                              : "median batch-1 tokens/s over the roofline"},
          {"matmul_tflops", matmul_tflops},
          {"prefill_flops_per_token", prefill_flops_per_token},
          {"prefill_tflops", prefill_tflops},
          {"prefill_peak_ratio", prefill_peak_ratio},
          {"dtype_comparison",
           compare_dtype.empty()
               ? nlohmann::json(nullptr)
               : nlohmann::json{{"dtype", compare_dtype},
                                {"decode_tokens_per_s", compare_decode_tokens_per_s},
                                {"base_decode_tokens_per_s", compare_base_tokens_per_s},
                                {"ratio", compare_ratio},
                                {"ratio_method",
                                 "median over paired batch-1 runs, alternating which runs "
                                 "first, of tokens/s over the first engine's"}}}};
}

std::string EngineBenchResult::ToTable() const {
  std::ostringstream out;
  char line[320];
  const bool gpu = device != "cpu";
  if (gpu) {
    std::snprintf(line, sizeof line, "model %s: %.1fM parameters, %s weights, %s (%s)\n",
                  model_id.c_str(), params_millions, dtype.c_str(), device.c_str(),
                  device_name.c_str());
    out << line;
    std::snprintf(line, sizeof line,
                  "device peaks (same run): copy %.1f GB/s (read + write), bf16 GEMM %.1f "
                  "TFLOP/s\n",
                  copy_gbps, matmul_tflops);
  } else {
    std::snprintf(line, sizeof line,
                  "model %s: %.1fM parameters, %s weights, cpu, %d threads, %s kernels\n",
                  model_id.c_str(), params_millions, dtype.c_str(), threads, cpu_kernels.c_str());
    out << line;
    std::snprintf(line, sizeof line,
                  "memory bandwidth: read %.1f GB/s (median, one before each batch-1 run), "
                  "copy %.1f GB/s (same run)\n",
                  read_gbps, copy_gbps);
  }
  out << line;
  out << "batch  prefill tok/s  decode tok/s  decode vs batch 1 (paired)\n";
  const double base = decode_tokens_per_s.count(1) ? decode_tokens_per_s.at(1) : 0;
  for (auto [b, decode] : decode_tokens_per_s) {
    const auto vs = decode_vs_batch1.find(b);
    std::snprintf(line, sizeof line, "%5d  %13.1f  %12.1f  %16.2fx\n", b,
                  prefill_tokens_per_s.at(b), decode,
                  vs == decode_vs_batch1.end() ? 0.0 : vs->second);
    out << line;
  }
  std::snprintf(
      line, sizeof line,
      "roofline (batch-1 decode): %.1f MB of matrices per token / %.1f GB/s %s = %.1f tok/s; "
      "measured %.1f tok/s = %.2f of roofline%s\n",
      weight_bytes_per_token / 1e6, gpu ? copy_gbps : read_gbps, gpu ? "copy" : "read",
      roofline_tokens_per_s, base, roofline_ratio, gpu ? "" : " (median of per-run ratios)");
  out << line;
  if (!gpu && fma_gflops > 0 && !decode_peak_ratio.empty()) {
    const auto [batch, ratio] = *decode_peak_ratio.rbegin();
    std::snprintf(line, sizeof line,
                  "compute: FMA peak %.0f GFLOP/s (%d thread%s, %s, median, one before each "
                  "batch-1 run); batch-%d decode runs its matrices at %.0f GFLOP/s = %.2f of it\n",
                  fma_gflops, threads, threads == 1 ? "" : "s", cpu_kernels.c_str(), batch,
                  ratio * fma_gflops, ratio);
    out << line;
  }
  if (!compare_dtype.empty()) {
    std::snprintf(line, sizeof line,
                  "%s weights (same run, paired batch-1 runs): %.1f tok/s vs %.1f = %.2fx\n",
                  compare_dtype.c_str(), compare_decode_tokens_per_s, compare_base_tokens_per_s,
                  compare_ratio);
    out << line;
  }
  if (gpu) {
    std::snprintf(line, sizeof line,
                  "prefill: %.2f GFLOP per token, best %.1f TFLOP/s = %.2f of the bf16 GEMM "
                  "peak\n",
                  prefill_flops_per_token / 1e9, prefill_tflops, prefill_peak_ratio);
    out << line;
  }
  return out.str();
}

}  // namespace pdserve::bench
