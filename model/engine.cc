#include "model/engine.h"

#include <algorithm>
#include <optional>

#include "model/backend_factory.h"
#include "model/logprobs.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::model {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kPreempted:
      return "preempted";
  }
  return "";
}

Result<std::unique_ptr<Engine>> Engine::Load(const std::string& model_dir,
                                             const EngineOptions& options) {
  if (options.page_size < 1 || options.max_batch_tokens < 1 || options.max_running < 1) {
    return InvalidArgument("page_size, max_batch_tokens and max_running must be >= 1");
  }
  if (options.kv_lookahead_tokens < 0) {
    return InvalidArgument("kv_lookahead_tokens must be >= 0 (0: reserve max_tokens up front)");
  }
  PDSERVE_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::Load(model_dir));
  PDSERVE_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                           CreateBackend(model_dir, config, options));
  auto engine = std::make_unique<Engine>(std::move(backend), options);
  std::vector<int32_t> eos(config.eos_token_ids.begin(), config.eos_token_ids.end());
  engine->set_eos_ids(std::move(eos));
  engine->set_vocabulary_dir(model_dir);
  return engine;
}

void Engine::set_vocabulary(std::shared_ptr<const grammar::TokenVocabulary> vocabulary) {
  vocabulary_ = std::move(vocabulary);
  grammars_.reset();
}

Result<std::unique_ptr<grammar::TokenConstraint>> Engine::ConstraintFor(
    const SamplingParams& params, std::span<const int32_t> generated) {
  if (params.json_schema.empty()) return std::unique_ptr<grammar::TokenConstraint>();
  if (!grammars_) {
    if (!vocabulary_) {
      if (vocabulary_dir_.empty()) {
        return FailedPrecondition("this engine has no tokenizer: a response format needs one");
      }
      auto tokenizer = tokenizer::Tokenizer::Load(vocabulary_dir_);
      if (!tokenizer.ok()) {
        return FailedPrecondition("a response format needs the model's tokenizer: " +
                                  tokenizer.status().message());
      }
      vocabulary_ = grammar::TokenVocabulary::FromTokenizer(**tokenizer, config().vocab_size);
    }
    grammars_ = std::make_unique<grammar::GrammarPlans>(vocabulary_);
  }
  PDSERVE_ASSIGN_OR_RETURN(
      std::shared_ptr<grammar::GrammarPlan> plan,
      grammars_->For(params.json_schema, params.json_prefix, params.json_suffix));
  auto constraint = std::make_unique<grammar::TokenConstraint>(std::move(plan));
  for (int32_t token : generated) {
    if (!constraint->Accept(token)) {
      return InvalidArgument("the tokens generated so far do not follow the response format");
    }
  }
  return constraint;
}

std::span<const int32_t> Engine::EndIds(const Sequence& s) {
  end_ids_.assign(s.params.stop_token_ids.begin(), s.params.stop_token_ids.end());
  if (!s.params.ignore_eos) end_ids_.insert(end_ids_.end(), eos_ids_.begin(), eos_ids_.end());
  return end_ids_;
}

Engine::Engine(std::unique_ptr<Backend> backend, const EngineOptions& options)
    : backend_(std::move(backend)), options_(options), pool_(backend_->kv_shape().num_pages) {
  options_.page_size = backend_->kv_shape().page_size;
}

int Engine::ReservedTokens(const Sequence& s) const {
  // In 64 bits: max_tokens comes from a peer and may be anything up to INT32_MAX.
  return static_cast<int>(
      std::min<int64_t>(config().max_seq_len, int64_t{s.prompt_len} + s.params.max_tokens));
}

int Engine::InitialKvTokens(int prompt_tokens, int max_tokens) const {
  const int64_t all = std::min<int64_t>(config().max_seq_len, int64_t{prompt_tokens} + max_tokens);
  if (options_.kv_lookahead_tokens == 0) return static_cast<int>(all);
  return static_cast<int>(
      std::min<int64_t>(all, int64_t{prompt_tokens} + options_.kv_lookahead_tokens));
}

int Engine::FreePagesForNewSequences() const {
  const int kept = options_.kv_lookahead_tokens > 0 ? num_running() : 0;
  return std::max(0, pool_.free_pages() - kept);
}

Status Engine::CheckPrompt(std::span<const int32_t> prompt) const {
  if (prompt.empty()) return InvalidArgument("the prompt has no tokens");
  const int max_len = config().max_seq_len;
  if (static_cast<int>(prompt.size()) >= max_len) {
    return OutOfRange("prompt of " + std::to_string(prompt.size()) +
                      " tokens leaves no room to generate in the context of " +
                      std::to_string(max_len));
  }
  for (int32_t t : prompt) {
    if (t < 0 || t >= config().vocab_size) {
      return InvalidArgument("token id " + std::to_string(t) + " is outside the vocabulary");
    }
  }
  return Status::Ok();
}

Status Engine::CheckSampling(const SamplingParams& params) const {
  PDSERVE_RETURN_IF_ERROR(params.Validate());
  for (const auto& [token, bias] : params.logit_bias) {
    if (token >= config().vocab_size) {
      return InvalidArgument("logit_bias names token " + std::to_string(token) +
                             ", outside the vocabulary of " + std::to_string(config().vocab_size));
    }
  }
  return Status::Ok();
}

Result<uint64_t> Engine::Add(std::vector<int32_t> prompt, const SamplingParams& params,
                             bool keep_pages) {
  PDSERVE_RETURN_IF_ERROR(CheckSampling(params));
  PDSERVE_RETURN_IF_ERROR(CheckPrompt(prompt));
  if (keep_pages && params.n > 1) {
    return InvalidArgument("a prompt whose pages are kept for a transfer has one choice, not " +
                           std::to_string(params.n));
  }
  const uint64_t group = next_id_;
  std::vector<std::unique_ptr<Sequence>> choices;
  for (int i = 0; i < params.n; ++i) {
    SamplingParams p = params;
    if (p.seed && i > 0) p.seed = *p.seed + static_cast<uint64_t>(i);
    auto seq = std::make_unique<Sequence>(Sequence{.id = next_id_++,
                                                   .group = group,
                                                   .choice = i,
                                                   .tokens = prompt,
                                                   .params = p,
                                                   .sampler = Sampler(p),
                                                   .keep_pages = keep_pages});
    seq->prompt_len = seq->prefill_len = static_cast<int>(seq->tokens.size());
    // A resumed stream's prompt ends with the tokens it generated before.
    const size_t drawn = std::min(seq->tokens.size(), static_cast<size_t>(p.samples_drawn));
    PDSERVE_ASSIGN_OR_RETURN(seq->constraint, ConstraintFor(p, std::span(seq->tokens).last(drawn)));
    const int pages = PagesForTokens(ReservedTokens(*seq), options_.page_size);
    if (pages > pool_.num_pages()) {
      return ResourceExhausted("request needs " + std::to_string(pages) +
                               " KV pages; the pool has " + std::to_string(pool_.num_pages()));
    }
    choices.push_back(std::move(seq));
  }
  for (size_t i = 1; i < choices.size(); ++i)
    choices[0]->followers.push_back(std::move(choices[i]));
  open_choices_[group] = params.n;
  waiting_.push_back(std::move(choices[0]));
  return group;
}

Result<uint64_t> Engine::AddPrefilled(std::vector<int32_t> prompt, int32_t first_token,
                                      std::vector<int32_t> pages, const SamplingParams& params) {
  PDSERVE_RETURN_IF_ERROR(CheckSampling(params));
  PDSERVE_RETURN_IF_ERROR(CheckPrompt(prompt));
  if (params.n != 1) {
    return InvalidArgument("a prefilled sequence has one choice, not " + std::to_string(params.n));
  }
  if (first_token < 0 || first_token >= config().vocab_size) {
    return InvalidArgument("first token id " + std::to_string(first_token) +
                           " is outside the vocabulary");
  }
  const int prompt_len = static_cast<int>(prompt.size());
  const uint64_t group = next_id_++;
  auto seq = std::make_unique<Sequence>(Sequence{.id = group,
                                                 .group = group,
                                                 .tokens = std::move(prompt),
                                                 .prompt_len = prompt_len,
                                                 .prefill_len = prompt_len,
                                                 .computed = prompt_len,
                                                 .pages = std::move(pages),
                                                 .params = params,
                                                 .sampler = Sampler(params),
                                                 .generated = 1});
  const bool up_front = options_.kv_lookahead_tokens == 0;
  const int needed =
      PagesForTokens(up_front ? ReservedTokens(*seq) : prompt_len, options_.page_size);
  if (static_cast<int>(seq->pages.size()) < needed) {
    return InvalidArgument("a prefilled sequence needs " + std::to_string(needed) + " pages for " +
                           (up_front ? "its prompt and max_tokens" : "its prompt") + ", got " +
                           std::to_string(seq->pages.size()));
  }
  for (int32_t p : seq->pages) {
    if (p < 0 || p >= pool_.num_pages()) {
      return InvalidArgument("page id " + std::to_string(p) + " is outside the KV pool");
    }
  }
  seq->tokens.push_back(first_token);
  seq->sampler.SkipSample();  // the first token used one draw of the seeded stream
  if (!params.json_schema.empty()) {
    // The tokens generated before (a resumed stream's) and the first, unless it ended the text.
    const size_t drawn =
        std::min(static_cast<size_t>(prompt_len), static_cast<size_t>(params.samples_drawn));
    std::vector<int32_t> generated(seq->tokens.end() - 1 - static_cast<std::ptrdiff_t>(drawn),
                                   seq->tokens.end());
    bool is_stop = false;
    (void)CheckFinish(*seq, first_token, &is_stop);
    if (is_stop) generated.pop_back();
    PDSERVE_ASSIGN_OR_RETURN(seq->constraint, ConstraintFor(params, generated));
  }
  open_choices_[group] = 1;
  waiting_.push_back(std::move(seq));
  return group;
}

std::vector<int32_t> Engine::TakeKeptPages(uint64_t seq_id) {
  auto it = kept_pages_.find(seq_id);
  if (it == kept_pages_.end()) return {};
  std::vector<int32_t> pages = std::move(it->second);
  kept_pages_.erase(it);
  return pages;
}

std::vector<BlockKey> Engine::BlockKeys(std::span<const int32_t> tokens) const {
  return PromptBlockKeys(options_.cache_salt, tokens, options_.page_size);
}

void Engine::AcquireCachedPrefix(Sequence& s) {
  const int page = options_.page_size;
  ExtendBlockKeys(s.block_keys, options_.cache_salt, std::span(s.tokens).first(s.prefill_len),
                  page);
  // The last token is always computed: its logits give the next token.
  const size_t most =
      std::min(s.block_keys.size(), static_cast<size_t>((s.prefill_len - 1) / page));
  s.pages = pool_.AcquirePrefix(std::span(s.block_keys).first(most));
  s.cached_blocks = static_cast<int>(s.pages.size());
  s.computed = s.cached_blocks * page;
}

void Engine::CacheComputedBlocks(Sequence& s) {
  const int page = options_.page_size;
  const int full = s.computed / page;
  if (full <= s.cached_blocks) return;
  ExtendBlockKeys(s.block_keys, options_.cache_salt, std::span(s.tokens).first(s.computed), page);
  const int from = s.cached_blocks;
  pool_.CacheBlocks(std::span(s.pages).subspan(from, full - from),
                    std::span(s.block_keys).subspan(from, full - from),
                    from == 0 ? 0 : s.block_keys[from - 1]);
  s.cached_blocks = full;
}

void Engine::Cancel(uint64_t seq_id) {
  auto cancel = [&](Sequence& s) {
    pool_.Free(s.pages);  // a prefilled sequence came with its pages
    cancelled_.emplace_back(s.group, s.choice);
    for (const auto& f : s.followers) cancelled_.emplace_back(f->group, f->choice);
  };
  for (auto it = running_.begin(); it != running_.end();) {
    if (it->second->group != seq_id) {
      ++it;
      continue;
    }
    cancel(*it->second);
    it = running_.erase(it);
  }
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->group != seq_id) {
      ++it;
      continue;
    }
    cancel(**it);
    it = waiting_.erase(it);
  }
}

void Engine::PreemptNewest(std::vector<TokenEvent>* events) {
  auto newest = std::prev(running_.end());
  std::unique_ptr<Sequence> s = std::move(newest->second);
  running_.erase(newest);
  pool_.Free(s->pages);  // its cached full blocks stay, for its readmission to find
  s->pages.clear();
  s->cached_blocks = 0;
  if (s->generated == 0) {  // its prompt is computed again, its logprobs with it
    s->prompt_logprobs.clear();
    s->prompt_top_logprobs.clear();
  }
  ++num_preemptions_;
  if (options_.preemption == EngineOptions::Preemption::kHandBack && s->params.n == 1) {
    Emit({s->group, -1, FinishReason::kPreempted, false}, events);
    return;
  }
  // Every token so far is run again as prompt work; the last chunk's logits give the token a
  // decode step would have, from the same sampler.
  s->computed = 0;
  s->prefill_len = static_cast<int>(s->tokens.size());
  waiting_.push_front(std::move(s));
}

void Engine::GrowOrPreempt(std::vector<TokenEvent>* events) {
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    Sequence& s = *it->second;
    if (s.computed < s.prefill_len) continue;  // its prompt's pages came with its admission
    while (!pool_.EnsureCapacity(s.pages, s.computed + 1, options_.page_size).ok()) {
      const bool newest = std::next(it) == running_.end();
      PreemptNewest(events);
      if (newest) return;  // it was the newest; every older sequence has its page
    }
  }
}

void Engine::Admit() {
  // A sequence preempted to recompute waits first in line; a new one is admitted only while a
  // page for every running sequence's next token would be left, so admitting it does not
  // preempt at once what it joins.
  while (!waiting_.empty() && static_cast<int>(running_.size()) < options_.max_running) {
    Sequence& s = *waiting_.front();
    if (s.computed == 0) {  // not prefilled elsewhere: pages for its prompt work now
      // A prompt's logprobs need its every row: none of it comes from the cache.
      const bool every_row = s.params.prompt_logprobs && s.generated == 0;
      if (options_.prefix_cache && !every_row) AcquireCachedPrefix(s);
      const int want = InitialKvTokens(s.prefill_len, s.params.max_tokens - s.generated);
      const int pages = PagesForTokens(want, options_.page_size) - static_cast<int>(s.pages.size());
      if ((!running_.empty() && pages > FreePagesForNewSequences()) ||
          !pool_.EnsureCapacity(s.pages, want, options_.page_size).ok()) {
        pool_.Free(s.pages);  // the cached prefix goes back, to be matched again next step
        s.pages.clear();
        s.computed = s.cached_blocks = 0;
        break;
      }
      if (options_.prefix_cache) {
        prefix_cache_queries_ += s.prefill_len;
        prefix_cache_hits_ += s.computed;
        if (s.generated == 0) s.cached_tokens = s.computed;
      }
    }
    running_.emplace(s.id, std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

FinishReason Engine::CheckFinish(const Sequence& s, int32_t token, bool* is_stop) const {
  *is_stop = std::find(s.params.stop_token_ids.begin(), s.params.stop_token_ids.end(), token) !=
                 s.params.stop_token_ids.end() ||
             (!s.params.ignore_eos &&
              std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end());
  if (*is_stop) return FinishReason::kStop;
  if (s.generated >= s.params.max_tokens) return FinishReason::kLength;
  if (static_cast<int>(s.tokens.size()) >= config().max_seq_len) return FinishReason::kLength;
  return FinishReason::kNone;
}

TokenEvent& Engine::Emit(TokenEvent event, std::vector<TokenEvent>* events) {
  if (event.finish != FinishReason::kNone) {
    auto it = open_choices_.find(event.seq_id);
    if (it != open_choices_.end() && --it->second == 0) {
      open_choices_.erase(it);
      event.ends_request = true;
    }
  }
  events->push_back(std::move(event));
  return events->back();
}

TokenEvent& Engine::AcceptToken(Sequence& s, int32_t token, std::vector<TokenEvent>* events) {
  s.tokens.push_back(token);
  ++s.generated;
  bool is_stop = false;
  FinishReason finish = CheckFinish(s, token, &is_stop);
  if (s.constraint && !is_stop) {
    // A token the mask let through only where the grammar was stuck is refused here: the
    // text stays as it was, and the next mask is the same.
    (void)s.constraint->Accept(token);
    if (finish == FinishReason::kNone && s.constraint->terminated()) finish = FinishReason::kStop;
  }
  TokenEvent e{s.group, token, finish, is_stop, s.generated == 1 ? s.cached_tokens : 0};
  e.choice = s.choice;
  if (s.generated == 1) {
    e.prompt_logprobs = std::move(s.prompt_logprobs);
    e.prompt_top_logprobs = std::move(s.prompt_top_logprobs);
  }
  return Emit(std::move(e), events);
}

TokenEvent& Engine::SampleRow(Sequence& s, std::span<float> logits,
                              std::vector<TokenEvent>* events) {
  // The model's distribution, before the mask changes the row (an allowed token keeps its
  // logit, so the sampled one's is read after).
  std::optional<RowLogprobs> logprobs;
  if (s.params.logprobs >= 0) logprobs.emplace(logits, s.params.logprobs);
  std::vector<std::pair<int32_t, float>> unbiased;  // the biased tokens' own logits
  for (const auto& [id, bias] : s.params.logit_bias) {
    unbiased.emplace_back(id, logits[static_cast<size_t>(id)]);
    logits[static_cast<size_t>(id)] += bias;
  }
  if (s.constraint) s.constraint->Mask(logits, EndIds(s));
  const int32_t token = s.sampler.Sample(logits);
  float raw_logit = logits[static_cast<size_t>(token)];
  for (const auto& [id, logit] : unbiased) raw_logit = id == token ? logit : raw_logit;
  TokenEvent& e = AcceptToken(s, token, events);
  if (logprobs) {
    e.has_logprob = true;
    e.logprob = logprobs->Of(raw_logit);
    e.top_logprobs = logprobs->top();
  }
  return e;
}

void Engine::SampleFollowers(Sequence& leader, std::span<const float> row,
                             std::vector<TokenEvent>* events,
                             std::vector<std::unique_ptr<Sequence>>* spawned) {
  for (auto& f : leader.followers) {
    follower_row_.assign(row.begin(), row.end());
    f->cached_tokens = leader.cached_tokens;
    if (SampleRow(*f, follower_row_, events).finish != FinishReason::kNone) continue;
    // Its KV: the prompt's full pages from the cache, then the rest of the prompt and its first
    // token computed as prompt work, whose last logits give its second token.
    f->computed = 0;
    f->prefill_len = static_cast<int>(f->tokens.size());
    spawned->push_back(std::move(f));
  }
  leader.followers.clear();
}

Status Engine::Step(std::vector<TokenEvent>* events, StepStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  if (stats) {
    *stats = StepStats();
    stats->start = start;
  }
  for (const auto& [group, choice] : cancelled_) {
    TokenEvent e{group, -1, FinishReason::kCancelled, false};
    e.choice = choice;
    Emit(std::move(e), events);
  }
  cancelled_.clear();
  GrowOrPreempt(events);
  Admit();

  // Decoding sequences first (one token each), then prompt chunks within the token budget.
  ForwardBatch batch;
  std::vector<Sequence*> in_batch;
  int budget = options_.max_batch_tokens;
  int prompt_tokens = 0, decode_tokens = 0;
  for (auto& [id, s] : running_) {
    if (s->computed < s->prefill_len || budget == 0) continue;
    batch.chunks.push_back(
        {std::span(s->tokens).subspan(s->computed, 1), s->computed, s->pages, true, true});
    in_batch.push_back(s.get());
    --budget;
    ++decode_tokens;
  }
  for (auto& [id, s] : running_) {
    if (s->computed >= s->prefill_len || budget == 0) continue;
    const bool every_row = s->params.prompt_logprobs && s->generated == 0;
    int n = std::min(budget, s->prefill_len - s->computed);
    if (every_row) n = std::min(n, SamplingParams::kMaxPromptLogprobRows);
    const bool last = s->computed + n == s->prefill_len;
    batch.chunks.push_back(
        {std::span(s->tokens).subspan(s->computed, n), s->computed, s->pages, last});
    batch.chunks.back().all_logits = every_row;
    in_batch.push_back(s.get());
    budget -= n;
    prompt_tokens += n;
  }
  if (batch.chunks.empty()) return Status::Ok();

  std::vector<PromptDone> prompts_done;
  if (layer_hook_) {
    for (size_t i = 0; i < in_batch.size(); ++i) {
      const Sequence& s = *in_batch[i];
      const int end = s.computed + static_cast<int>(batch.chunks[i].tokens.size());
      if (s.generated == 0 && end == s.prompt_len) {
        prompts_done.push_back({s.group, s.pages, s.prompt_len});
      }
    }
    if (!prompts_done.empty()) {
      batch.after_layer_kv = [&](int layer) { layer_hook_(layer, prompts_done); };
    }
  }
  // A GPU picks greedy tokens where the logits are, so only ids cross to the host; any
  // sampled row needs the logits here (its Sampler holds the request's random stream).
  const bool greedy_on_device =
      backend_->greedy_on_device() &&
      std::all_of(in_batch.begin(), in_batch.end(), [](const Sequence* s) {
        return s->params.greedy() && !s->constraint && s->params.logprobs < 0 &&
               s->params.logit_bias.empty() && s->followers.empty();
      });
  if (greedy_on_device) {
    PDSERVE_RETURN_IF_ERROR(backend_->ForwardGreedy(batch, &greedy_tokens_));
  } else {
    PDSERVE_RETURN_IF_ERROR(backend_->Forward(batch, &logits_));
  }

  const int vocab = config().vocab_size;
  int row = 0;
  std::vector<uint64_t> ended;                     // sequences whose last event this step was
  std::vector<std::unique_ptr<Sequence>> spawned;  // choices that start after this step
  for (size_t i = 0; i < in_batch.size(); ++i) {
    Sequence& s = *in_batch[i];
    const SequenceChunk& chunk = batch.chunks[i];
    const int n = static_cast<int>(chunk.tokens.size());
    if (chunk.all_logits) {
      // Row j (position computed + j) gives the prompt token after it; a last chunk's last row
      // gives the first generated token, sampled below.
      for (int j = 0; j < n && s.computed + j + 1 < s.prompt_len; ++j) {
        const std::span<const float> logits =
            std::span(logits_).subspan(static_cast<size_t>(row + j) * vocab, vocab);
        const RowLogprobs lp(logits, s.params.logprobs);
        const int32_t next = s.tokens[static_cast<size_t>(s.computed + j + 1)];
        s.prompt_logprobs.push_back(lp.Of(logits[static_cast<size_t>(next)]));
        s.prompt_top_logprobs.push_back(lp.top());
      }
      row += chunk.want_logits ? n - 1 : n;
    }
    s.computed += n;
    if (!chunk.want_logits) continue;
    if (s.constraint && s.constraint->terminated()) {
      // The text was whole before this token (a first token from a prefill worker ended it).
      ++row;
      TokenEvent e{s.group, -1, FinishReason::kStop, false};
      e.choice = s.choice;
      Emit(std::move(e), events);
      ended.push_back(s.id);
      continue;
    }
    FinishReason finish;
    if (greedy_on_device) {
      finish = AcceptToken(s, greedy_tokens_[row++], events).finish;
    } else {
      const std::span<float> logits =
          std::span(logits_).subspan(static_cast<size_t>(row++) * vocab, vocab);
      if (!s.followers.empty()) {
        leader_row_.assign(logits.begin(), logits.end());
        for (auto& f : s.followers) {  // each choice's first event carries the prompt's
          f->prompt_logprobs = s.prompt_logprobs;
          f->prompt_top_logprobs = s.prompt_top_logprobs;
        }
      }
      finish = SampleRow(s, logits, events).finish;
      if (!s.followers.empty()) SampleFollowers(s, leader_row_, events, &spawned);
    }
    if (finish != FinishReason::kNone) ended.push_back(s.id);
  }
  if (options_.prefix_cache) {
    for (Sequence* s : in_batch) CacheComputedBlocks(*s);
  }
  if (stats) {
    stats->prompt_tokens = prompt_tokens;
    stats->decode_tokens = decode_tokens;
    stats->shape = batch.Shape();
    stats->seq_ids.clear();
    stats->seq_tokens.clear();
    stats->seq_prompt.clear();
    for (size_t i = 0; i < in_batch.size(); ++i) {
      stats->seq_ids.push_back(in_batch[i]->group);
      stats->seq_tokens.push_back(static_cast<int>(batch.chunks[i].tokens.size()));
      stats->seq_prompt.push_back(i >= static_cast<size_t>(decode_tokens));
    }
  }
  for (uint64_t id : ended) {
    auto it = running_.find(id);
    if (it->second->keep_pages) {
      kept_pages_[it->second->group] = std::move(it->second->pages);
    } else {
      pool_.Free(it->second->pages);
    }
    running_.erase(it);
  }
  // After the step cached the prompt's full pages, which they start from.
  for (auto it = spawned.rbegin(); it != spawned.rend(); ++it) waiting_.push_front(std::move(*it));
  if (stats)
    stats->seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

}  // namespace pdserve::model
