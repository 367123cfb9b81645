// Engine: one model on one device running many sequences with continuous batching. Each Step
// grows the KV of its decoding sequences by a page when they need one, preempting the newest
// sequences when the pool runs out (vLLM's policy), admits waiting sequences while pages last,
// then runs one mixed batch: one token for every decoding sequence plus prompt chunks up to a
// token budget (chunked prefill). A sequence is admitted with pages for its prompt plus
// kv_lookahead_tokens; with kv_lookahead_tokens 0 it reserves prompt plus max_tokens up front
// and is never preempted. This is the single-process reference (`pdserve generate`) and the core of
// the prefill and decode workers.
// Prefix cache (EngineOptions::prefix_cache): after each step every full page of computed KV is
// named by its block key in the pool (KvPagePool::CacheBlocks), so it outlives its sequence as a
// cached page until evicted. A sequence admitted with its tokens to compute (new, or preempted to
// recompute) first acquires the cached pages of its leading full blocks, always leaving at least
// its last token to compute (its logits give the next token), and computes only the rest.
// Choices (SamplingParams::n > 1): the prompt runs once, as choice 0. The step that samples its
// first token samples every other choice's first token from the same logits (each with its own
// sampler, mask and bias); each then runs as a sequence of its own that starts first in line
// from the prompt's cached full pages (with the prefix cache; the prompt again without) and
// computes only the prompt's last partial page and its first token. Every event and StepStats
// entry names the id Add returned, with the choice; a choice preempted is recomputed here, never
// handed back, whatever EngineOptions::preemption says.
// Owned and driven by one thread; only KvPagePool (pages()) is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/block_key.h"
#include "common/status.h"
#include "grammar/token_constraint.h"
#include "grammar/token_vocabulary.h"
#include "model/backend.h"
#include "model/backend_factory.h"
#include "model/kv_pool.h"
#include "model/model_config.h"
#include "model/sampler.h"

namespace pdserve::model {

struct SimFaults;

struct EngineOptions {
  // "cpu", "cuda:N" where built with CUDA and device N exists, or "sim:PROFILE" (a profile's
  // file or its name in profiles/: model/sim/sim_backend.h)
  std::string device = "cpu";
  int page_size = 16;           // tokens per KV page
  int num_pages = 0;            // KV pages; 0 = as many as kv_memory_mb holds
  int64_t kv_memory_mb = 512;   // KV pool size when num_pages is 0 (f32 pages on cpu, bf16 on cuda)
  int max_batch_tokens = 2048;  // tokens per step (decode tokens + prompt chunks); >= 1
  int max_running = 256;        // sequences decoding at once
  int threads = 0;              // CPU threads; 0 = all
  // KV on demand: a sequence starts with pages for its prompt plus this many tokens and grows
  // as it decodes. 0: pages for prompt plus max_tokens up front (no sequence is ever preempted).
  int kv_lookahead_tokens = 16;
  // What becomes of a sequence preempted for want of pages: kRecompute waits (first in line) and
  // recomputes its tokens' KV when pages free, with the same sampling state; kHandBack ends it
  // with FinishReason::kPreempted for its owner to resume elsewhere (a decode worker).
  enum class Preemption { kRecompute, kHandBack } preemption = Preemption::kRecompute;
  // Matrix dtype on the CPU: "auto" keeps the checkpoint's; "f32", "bf16" or "f16" converts at
  // load (Weights::ConvertedTo). The CUDA backend always holds bf16 ("auto" or "bf16").
  std::string dtype = "auto";
  // Device sim only: steps take this many times the profile's time, and faults to inject
  // (`pdserve sim`); null: none.
  double sim_slow_factor = 1.0;
  std::shared_ptr<SimFaults> sim_faults;
  // Keep full pages of computed KV as cached pages and start sequences from the cached pages of
  // their prompt's leading blocks. false: no matching and no retention (no block keys computed).
  bool prefix_cache = true;
  // The block keys' salt (common/block_key.h): what else than tokens names a block's KV. Workers
  // pass their KV layout hash, so that their keys are the gateway's.
  uint64_t cache_salt = 0;
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kPreempted };
// "stop", "length", "cancelled", "preempted"
const char* FinishReasonName(FinishReason reason);

// What one step produced for one sequence.
struct TokenEvent {
  uint64_t seq_id = 0;
  int32_t token = -1;  // -1 when the event only reports an end (cancel)
  FinishReason finish = FinishReason::kNone;
  bool is_stop_token = false;  // the token is an end-of-sequence/stop id (no text)
  // On a sequence's first sampled token: its prompt tokens whose KV came from the prefix cache.
  int cached_tokens = 0;
  // Where the sequence asked for logprobs (SamplingParams::logprobs >= 0): the token's and the
  // most likely tokens' log-probabilities (model/logprobs.h).
  bool has_logprob = false;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top_logprobs{};
  // On the first token's event where SamplingParams::prompt_logprobs asked: the prompt's tokens'
  // from its second on, and the most likely tokens' at each.
  std::vector<float> prompt_logprobs{};
  std::vector<std::vector<std::pair<int32_t, float>>> prompt_top_logprobs{};
  int choice = 0;  // which of its request's SamplingParams::n choices
  // This event ends the last of its request's choices still running (with one choice: it ends
  // the sequence); the id is unknown to the engine from now on.
  bool ends_request = false;
};

// How long a step took and what was in it (the ledger shares step time among requests).
struct StepStats {
  std::chrono::steady_clock::time_point start;  // when the step began
  double seconds = 0;
  int prompt_tokens = 0;
  int decode_tokens = 0;
  std::vector<uint64_t> seq_ids;
  std::vector<int> seq_tokens;   // tokens each of seq_ids ran in this step
  std::vector<bool> seq_prompt;  // whether that was prompt work (a prefill chunk)
  StepShape shape;               // the step's work, for the performance profile
};

// A sequence whose prompt's KV is complete once the current step's layers have run: what a
// prefill worker needs to push that KV layer by layer (Engine::set_layer_hook).
struct PromptDone {
  uint64_t seq_id = 0;
  std::span<const int32_t> pages;  // its block table (covers at least prompt_len tokens)
  int prompt_len = 0;
};
using LayerHook = std::function<void(int layer, std::span<const PromptDone> done)>;

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> Load(const std::string& model_dir,
                                              const EngineOptions& options);
  Engine(std::unique_ptr<Backend> backend, const EngineOptions& options);

  // Queues a prompt, with params.n choices. Refuses empty prompts, prompts that leave no room to
  // generate within the context, and requests whose pages could never fit the pool. With
  // keep_pages the pages outlive the sequence's end until TakeKeptPages (a prefill worker still
  // sends them); it takes one choice only.
  Result<uint64_t> Add(std::vector<int32_t> prompt, const SamplingParams& params,
                       bool keep_pages = false);
  // What Add checks of a prompt: not empty, shorter than the context, every id in the
  // vocabulary. A decode worker checks it before it reserves pages for the prompt's KV.
  Status CheckPrompt(std::span<const int32_t> prompt) const;
  // Queues a sequence whose prompt's KV is already in `pages` (written by a KV transfer) and
  // whose first token was sampled elsewhere: it joins the batch decoding `first_token` (one
  // choice: params.n is 1). The
  // pages must cover the prompt (prompt plus max_tokens when kv_lookahead_tokens is 0); they are
  // the engine's from now on (one reference each, dropped at the end). With the prefix cache they
  // may start with pages acquired from it (pages().AcquirePrefix of the prompt's BlockKeys), and
  // the prompt's full pages are cached after its first step.
  Result<uint64_t> AddPrefilled(std::vector<int32_t> prompt, int32_t first_token,
                                std::vector<int32_t> pages, const SamplingParams& params);
  // The pages of a finished keep_pages sequence; the caller frees them (pages().Free, any
  // thread: that drops the sequence's reference, and a cached page stays cached). Empty for an
  // unknown sequence.
  std::vector<int32_t> TakeKeptPages(uint64_t seq_id);
  // Called during Step after each layer's KV write, for the sequences whose prompt completes in
  // that step. Only a prefill worker sets it.
  void set_layer_hook(LayerHook hook) { layer_hook_ = std::move(hook); }
  // The KV a sequence of `prompt_tokens` asks for when it starts: prompt plus lookahead, within
  // prompt plus max_tokens and the context.
  int InitialKvTokens(int prompt_tokens, int max_tokens) const;
  // Free pages a new sequence may take: with KV on demand, a page for each running sequence's
  // next token stays out of them (a sequence taking it would be preempted as soon as they grew,
  // its prompt work wasted). What Admit checks and what a decode worker reports as free.
  int FreePagesForNewSequences() const;
  // Prefix cache. The block keys of `tokens`' full pages under this engine's salt and page size:
  // what a decode worker looks up (pages().MatchPrefix) and pins (pages().AcquirePrefix) for a
  // prompt whose KV it receives, and passes as the held prefix's pages to AddPrefilled.
  std::vector<BlockKey> BlockKeys(std::span<const int32_t> tokens) const;
  bool prefix_cache() const { return options_.prefix_cache; }
  // Prompt tokens looked up in the cache at admission (a preempted sequence's readmission counts
  // again), and those found cached (vLLM's prefix_cache_queries and prefix_cache_hits).
  int64_t prefix_cache_queries() const { return prefix_cache_queries_; }
  int64_t prefix_cache_hits() const { return prefix_cache_hits_; }
  // The pool's KV events and full list (KvPagePool::TakeKvEvents, CachedBlocks).
  std::vector<KvCacheEvent> TakeKvEvents() { return pool_.TakeKvEvents(); }
  KvCacheSnapshot CachedBlocks() const { return pool_.CachedBlocks(); }
  // Ends a sequence (every choice of it) and frees its pages; an event with
  // FinishReason::kCancelled follows for each choice still running.
  void Cancel(uint64_t seq_id);
  // Runs one batch; appends one event per sequence that produced a token or ended.
  Status Step(std::vector<TokenEvent>* events, StepStats* stats = nullptr);

  bool HasWork() const { return !waiting_.empty() || !running_.empty() || !cancelled_.empty(); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_running() const { return static_cast<int>(running_.size()); }
  // Sequences preempted for want of KV pages since the engine started.
  int64_t num_preemptions() const { return num_preemptions_; }
  const ModelConfig& config() const { return backend_->config(); }
  int max_batch_tokens() const { return options_.max_batch_tokens; }
  int kv_lookahead_tokens() const { return options_.kv_lookahead_tokens; }
  Backend& backend() { return *backend_; }
  KvPagePool& pages() { return pool_; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  void set_eos_ids(std::vector<int32_t> ids) { eos_ids_ = std::move(ids); }
  // The token bytes a request's json_schema is matched against: set, or loaded from a model
  // directory's tokenizer on the first such request (Load sets the directory). Without either,
  // such a request is refused (FailedPrecondition).
  void set_vocabulary(std::shared_ptr<const grammar::TokenVocabulary> vocabulary);
  void set_vocabulary_dir(std::string model_dir) { vocabulary_dir_ = std::move(model_dir); }
  // The compiled schemas and their masks' cache (null before the first constrained request).
  const grammar::GrammarPlans* grammar_plans() const { return grammars_.get(); }

 private:
  struct Sequence {
    uint64_t id = 0;     // unique among the engine's sequences
    uint64_t group = 0;  // the id Add returned, shared by a request's choices
    int choice = 0;
    std::vector<int32_t> tokens;  // prompt, then generated
    int prompt_len = 0;
    // Tokens to run as prompt work before decoding: the prompt, or after a recompute
    // preemption every token so far.
    int prefill_len = 0;
    int computed = 0;  // tokens whose KV is in the cache
    std::vector<int32_t> pages{};
    SamplingParams params;
    Sampler sampler;
    int generated = 0;
    bool keep_pages = false;
    // Prefix cache: keys of full blocks of tokens computed or to compute; pages[0, cached_blocks)
    // are named in the cache (acquired from it, or cached after a step).
    std::vector<BlockKey> block_keys{};
    int cached_blocks = 0;
    int cached_tokens = 0;  // prompt tokens found cached at first admission
    // The response format's matcher (params.json_schema), past every token generated so far.
    std::unique_ptr<grammar::TokenConstraint> constraint{};
    // SamplingParams::prompt_logprobs: the prompt's tokens' so far (from its second).
    std::vector<float> prompt_logprobs{};
    std::vector<std::vector<std::pair<int32_t, float>>> prompt_top_logprobs{};
    // Choice 0 before its first token: the other choices, which sample theirs from its logits.
    std::vector<std::unique_ptr<Sequence>> followers{};
  };

  int ReservedTokens(const Sequence& s) const;
  // Samples s's next token from its row of logits (biased and masked in place), appends its
  // event and returns it.
  TokenEvent& SampleRow(Sequence& s, std::span<float> logits, std::vector<TokenEvent>* events);
  // Appends `token` to s, and its event.
  TokenEvent& AcceptToken(Sequence& s, int32_t token, std::vector<TokenEvent>* events);
  // Appends an event (seq_id: the group); one that ends a choice counts it out of its request's.
  TokenEvent& Emit(TokenEvent event, std::vector<TokenEvent>* events);
  // Choice 0 sampled its first token from `row`: the other choices sample theirs and those that
  // go on wait first in line (after the step has cached the prompt's pages: `spawned`).
  void SampleFollowers(Sequence& leader, std::span<const float> row,
                       std::vector<TokenEvent>* events,
                       std::vector<std::unique_ptr<Sequence>>* spawned);
  // Gives every decoding sequence, oldest first, a page for its next token, preempting the
  // newest sequences while the pool has none.
  void GrowOrPreempt(std::vector<TokenEvent>* events);
  // Takes the newest running sequence's pages (kRecompute: back to wait; kHandBack: ended).
  void PreemptNewest(std::vector<TokenEvent>* events);
  void Admit();
  // Acquires the cached pages of s's leading full blocks (at most prefill_len - 1 tokens) and
  // starts s after them.
  void AcquireCachedPrefix(Sequence& s);
  // Names s's full pages of computed KV in the cache.
  void CacheComputedBlocks(Sequence& s);
  FinishReason CheckFinish(const Sequence& s, int32_t token, bool* is_stop) const;
  // params.Validate(), and logit_bias's tokens within the vocabulary.
  Status CheckSampling(const SamplingParams& params) const;
  // The matcher of params.json_schema moved past `generated` (tokens sampled before, on this or
  // other workers); null without a schema. InvalidArgument: the schema does not compile, or
  // the tokens do not follow it.
  Result<std::unique_ptr<grammar::TokenConstraint>> ConstraintFor(
      const SamplingParams& params, std::span<const int32_t> generated);
  // The ids that end `s` (EOS unless ignore_eos, and its stop ids), into end_ids_.
  std::span<const int32_t> EndIds(const Sequence& s);

  std::unique_ptr<Backend> backend_;
  EngineOptions options_;
  KvPagePool pool_;
  std::vector<int32_t> eos_ids_;
  uint64_t next_id_ = 1;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::map<uint64_t, std::unique_ptr<Sequence>> running_;
  std::vector<std::pair<uint64_t, int>> cancelled_;  // (group, choice)
  std::map<uint64_t, int> open_choices_;             // by group: choices not ended
  std::vector<float> leader_row_, follower_row_;     // a leader's logits, for its followers
  int64_t num_preemptions_ = 0;
  int64_t prefix_cache_queries_ = 0, prefix_cache_hits_ = 0;
  std::map<uint64_t, std::vector<int32_t>> kept_pages_;
  LayerHook layer_hook_;
  std::vector<float> logits_;
  std::vector<int32_t> greedy_tokens_;
  std::string vocabulary_dir_;
  std::shared_ptr<const grammar::TokenVocabulary> vocabulary_;
  std::unique_ptr<grammar::GrammarPlans> grammars_;
  std::vector<int32_t> end_ids_;
};

}  // namespace pdserve::model
