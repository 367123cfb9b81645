#include "model/sim/sim_backend.h"

#include "tokenizer/tokenizer.h"

#include <sys/mman.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>

namespace pdserve::model {
namespace {

using Clock = std::chrono::steady_clock;

// splitmix64's finaliser: the next token is a pure function of the row's token and position.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// One layer's page pool: address space reserved, committed by the kernel page by page as
// transfers write it (untouched pages read as zeros and cost nothing).
class ReservedMemory {
 public:
  explicit ReservedMemory(size_t bytes) : bytes_(std::max<size_t>(bytes, 1)) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : p;
  }
  ~ReservedMemory() {
    if (data_) ::munmap(data_, bytes_);
  }
  ReservedMemory(const ReservedMemory&) = delete;
  ReservedMemory& operator=(const ReservedMemory&) = delete;
  void* data() const { return data_; }

 private:
  size_t bytes_;
  void* data_ = nullptr;
};

class SimBackend final : public Backend {
 public:
  SimBackend(const ModelConfig& served, const SimBackendOptions& options, KvCacheShape shape,
             std::vector<std::unique_ptr<ReservedMemory>> layers)
      : options_(options), shape_(shape), layers_(std::move(layers)) {
    config_ = served;
    // The pages hold one value per token: the transport moves small pages, and the real
    // model's bytes are accounted in simulated_kv().
    config_.n_kv_heads = shape.n_kv_heads;
    config_.head_dim = shape.head_dim;
    kv_.bytes_per_token_layer = 2.0 * served.n_kv_heads * served.head_dim * DTypeSize(served.dtype);
    // The profile's bytes a token, spread over the layers this worker pushes, so that a
    // prompt's transfer weighs what the profiled model's would.
    if (options.profile.kv_bytes_per_token > 0 && served.n_layers > 0) {
      kv_.bytes_per_token_layer = options.profile.kv_bytes_per_token / served.n_layers;
    }
    kv_.bytes_per_second = options.profile.kv_bytes_per_second;
  }

  const ModelConfig& config() const override { return config_; }
  const KvCacheShape& kv_shape() const override { return shape_; }
  std::string device() const override { return "sim:" + options_.profile.name; }
  void* KvLayerData(int layer) override { return layers_[layer]->data(); }
  bool greedy_on_device() const override { return true; }
  const SimulatedKv* simulated_kv() const override { return &kv_; }

  Status Forward(const ForwardBatch& batch, std::vector<float>* logits) override {
    std::vector<int32_t> next;
    PDSERVE_RETURN_IF_ERROR(Run(batch, &next));
    const size_t vocab = config_.vocab_size;
    logits->assign(next.size() * vocab, 0.0f);
    // Far above the rest: sampling at any temperature the engine allows picks it.
    for (size_t r = 0; r < next.size(); ++r) (*logits)[r * vocab + next[r]] = 1e4f;
    return Status::Ok();
  }

  Status ForwardGreedy(const ForwardBatch& batch, std::vector<int32_t>* tokens) override {
    return Run(batch, tokens);
  }

 private:
  Status Run(const ForwardBatch& batch, std::vector<int32_t>* next) {
    const auto start = Clock::now();
    PDSERVE_RETURN_IF_ERROR(ValidateBatch(batch, config_, shape_));
    if (const auto& faults = options_.faults) {
      if (start >= faults->freeze_at) {
        faults->WaitForRelease();
        return Unavailable("simulated worker frozen, released at shutdown");
      }
      if (start >= faults->fail_at) return Unavailable("simulated worker failure");
    }
    const StepShape shape = batch.Shape();
    FlagOutsideRange(shape);
    // A step's factor is drawn from its kind's spread, where the profile has one.
    const auto& spread =
        shape.prompt_tokens > 0 ? options_.profile.prefill_spread : options_.profile.decode_spread;
    const double drawn = spread.empty() ? 1.0 : SpreadFactor(spread, uniform_(draws_));
    const auto took = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
        options_.profile.StepSeconds(shape) * drawn * options_.slow_factor));
    auto end = start + took;
    // A decode step right after one ends no sooner than a real worker's would: the profile's gap
    // between them (where this process took less, the rest is waited here).
    const bool decode_only = shape.prompt_tokens == 0 && shape.decode_tokens > 0;
    if (decode_only && last_was_decode_ && options_.profile.decode_gap_seconds > 0) {
      end = std::max(end,
                     last_end_ + took +
                         std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(options_.profile.decode_gap_seconds)));
    }
    last_was_decode_ = shape.decode_tokens > 0;
    if (batch.after_layer_kv) {
      // Layer l's KV is ready (l + 1) / L of the way through the step.
      const int layers = shape_.n_layers;
      for (int l = 0; l < layers; ++l) {
        std::this_thread::sleep_until(start + (end - start) * (l + 1) / layers);
        batch.after_layer_kv(l);
      }
    }
    std::this_thread::sleep_until(end);
    last_end_ = end;
    next->clear();
    const std::vector<int32_t>* ids = options_.output_ids.get();
    auto token_after = [&](int32_t token, int position) {
      const uint64_t h =
          Mix((static_cast<uint64_t>(token) << 32) ^ static_cast<uint32_t>(position));
      const auto any = static_cast<int32_t>(h % static_cast<uint64_t>(config_.vocab_size));
      if (!ids || ids->empty()) return any;
      const int32_t text = (*ids)[h % ids->size()];
      return text < config_.vocab_size ? text : any;
    };
    for (const SequenceChunk& c : batch.chunks) {
      const int n = static_cast<int>(c.tokens.size());
      for (int i = 0; i < n; ++i) {
        if (batch.HasLogitRow(c, i)) next->push_back(token_after(c.tokens[i], c.start_pos + i));
      }
    }
    return Status::Ok();
  }

  // Logs each kind of excess over the profiled range once, with the step that first showed it.
  void FlagOutsideRange(const StepShape& shape) {
    const ProfiledRange& r = options_.profile.range;
    const int kinds = (shape.prompt_tokens > r.prompt_tokens ? 1 : 0) |
                      (shape.decode_tokens > r.decode_tokens ? 2 : 0) |
                      (shape.max_context > r.max_context ? 4 : 0);
    if (kinds == 0) return;
    ++steps_outside_;
    // The text is made only for a kind not yet logged: this runs every step.
    if ((flagged_kinds_ | kinds) == flagged_kinds_) return;
    flagged_kinds_ |= kinds;
    spdlog::warn(
        "profile '{}': a step with {} lies outside what was measured; its time is "
        "extrapolated ({} such steps so far)",
        options_.profile.name, options_.profile.OutsideRange(shape), steps_outside_);
  }

  SimBackendOptions options_;
  ModelConfig config_;
  KvCacheShape shape_;
  std::vector<std::unique_ptr<ReservedMemory>> layers_;
  SimulatedKv kv_;
  int flagged_kinds_ = 0;
  int64_t steps_outside_ = 0;
  // The draws of step factors: the n-th backend of a process has the n-th seed, so a run's
  // draws repeat in the next and no two workers of a `pdserve sim` share theirs.
  std::mt19937_64 draws_{Mix(next_seed_.fetch_add(1))};
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
  static inline std::atomic<uint64_t> next_seed_{1};
  Clock::time_point last_end_{};  // when the last step's time was up
  bool last_was_decode_ = false;  // it had decode work
};

}  // namespace

void SimFaults::Release() {
  std::lock_guard lock(mu_);
  released_ = true;
  cv_.notify_all();
}

void SimFaults::WaitForRelease() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return released_; });
}

Result<std::unique_ptr<Backend>> CreateSimBackend(const ModelConfig& config,
                                                  const SimBackendOptions& options) {
  if (!(options.slow_factor > 0) || options.slow_factor > 1e6) {
    return InvalidArgument("slow factor must be above 0, got " +
                           std::to_string(options.slow_factor));
  }
  if (options.page_size < 1) return InvalidArgument("page size must be at least 1");
  const PerformanceProfile& p = options.profile;
  if (!p.model_shape.empty()) {
    // A profile measured on another shape would time this model's steps wrongly.
    for (const auto& [field, value] : std::initializer_list<std::pair<const char*, int>>{
             {"num_hidden_layers", config.n_layers}, {"hidden_size", config.dim}}) {
      auto it = p.model_shape.find(field);
      if (it != p.model_shape.end() && it->is_number_integer() && it->get<int>() != value) {
        return InvalidArgument("profile '" + p.name + "' was measured on a model with " + field +
                               " " + std::to_string(it->get<int>()) + "; this model has " +
                               std::to_string(value));
      }
    }
  }
  KvCacheShape shape;
  shape.n_layers = config.n_layers;
  shape.page_size = options.page_size;
  shape.n_kv_heads = 1;
  shape.head_dim = 1;
  shape.dtype = DType::kF32;
  shape.num_pages = options.num_pages;
  if (shape.num_pages <= 0) {
    // The profiled worker's pool holds kv_pages * page_size tokens.
    shape.num_pages = static_cast<int>(
        std::max<int64_t>(1, int64_t{p.kv_pages} * p.page_size / options.page_size));
  }
  std::vector<std::unique_ptr<ReservedMemory>> layers;
  for (int l = 0; l < shape.n_layers; ++l) {
    layers.push_back(std::make_unique<ReservedMemory>(shape.layer_bytes()));
    if (!layers.back()->data()) {
      return ResourceExhausted("cannot reserve address space for the simulated KV pool");
    }
  }
  return std::unique_ptr<Backend>(
      std::make_unique<SimBackend>(config, options, shape, std::move(layers)));
}

std::shared_ptr<const std::vector<int32_t>> TextTokenIds(const std::string& model_dir) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const std::vector<int32_t>>> cache;
  std::lock_guard lock(mu);
  auto it = cache.find(model_dir);
  if (it != cache.end()) return it->second;
  std::shared_ptr<const std::vector<int32_t>> ids;
  if (auto tokenizer = tokenizer::Tokenizer::Load(model_dir); tokenizer.ok()) {
    auto text = std::make_shared<std::vector<int32_t>>();
    for (int32_t id = 0; id < (*tokenizer)->vocab_size(); ++id) {
      if (!(*tokenizer)->IsSpecial(id) && !(*tokenizer)->TokenBytes(id).empty()) {
        text->push_back(id);
      }
    }
    ids = std::move(text);
  } else {
    spdlog::warn("simulated tokens: no tokenizer in {} ({}); any id of the vocabulary", model_dir,
                 tokenizer.status().ToString());
  }
  cache[model_dir] = ids;
  return ids;
}

Result<std::string> ParseSimDevice(const std::string& device) {
  if (device.rfind("sim:", 0) != 0 || device.size() == 4) {
    return InvalidArgument("device '" + device + "' is not sim:PROFILE");
  }
  return device.substr(4);
}

}  // namespace pdserve::model
