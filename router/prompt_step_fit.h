// PromptStepFit: a prefill worker's step time as a fixed cost plus a cost per prompt token,
// fitted by least squares to its recent steps (each earlier step weighing kDecay as much as the
// next). A step's own rate (its tokens over its seconds) misleads when steps differ in size: the
// short steps of mostly cached prompts, a few tokens over the fixed cost, would drag a rate far
// below what a whole prompt runs at, and admission would predict waits too long. LoadView keeps
// one per worker; plain state, no locks.
#pragma once

#include <cstdint>

namespace pdserve::router {

class PromptStepFit {
 public:
  static constexpr double kDecay = 0.9;

  // A step that ran `tokens` prompt tokens (> 0) in `seconds` (> 0).
  void Add(int64_t tokens, double seconds);
  bool measured() const { return n_ > 0; }
  // Prompt tokens a second past the fixed cost (the fit's slope); 0 before any step. With steps
  // of one size only, or a fit that makes no sense (a slope <= 0), it is tokens over seconds and
  // the fixed cost 0.
  double tokens_per_second() const;
  // The fixed cost of a step, seconds (>= 0).
  double step_seconds() const;

 private:
  // Decayed sums of the steps' count, tokens (x), seconds (y) and their products.
  double n_ = 0, x_ = 0, y_ = 0, xx_ = 0, xy_ = 0;
  // The fit's slope (seconds a token) and intercept; slope 0 before any step.
  double slope_ = 0, intercept_ = 0;
};

}  // namespace pdserve::router
