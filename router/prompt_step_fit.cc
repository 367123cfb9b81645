// A prefill worker's step time, fitted; see prompt_step_fit.h.
#include "router/prompt_step_fit.h"

#include <algorithm>

namespace pdserve::router {

void PromptStepFit::Add(int64_t tokens, double seconds) {
  if (tokens <= 0 || !(seconds > 0)) return;
  const double x = static_cast<double>(tokens);
  n_ = kDecay * n_ + 1;
  x_ = kDecay * x_ + x;
  y_ = kDecay * y_ + seconds;
  xx_ = kDecay * xx_ + x * x;
  xy_ = kDecay * xy_ + x * seconds;
  const double spread = n_ * xx_ - x_ * x_;  // n^2 times the tokens' variance
  const double slope = spread > 1e-9 * n_ * xx_ ? (n_ * xy_ - x_ * y_) / spread : 0;
  const double intercept = (y_ - slope * x_) / n_;
  if (slope > 0 && intercept >= 0) {
    slope_ = slope;
    intercept_ = intercept;
  } else {  // one size of step, or noise: the plain ratio
    slope_ = y_ / x_;
    intercept_ = 0;
  }
}

double PromptStepFit::tokens_per_second() const { return slope_ > 0 ? 1 / slope_ : 0; }

double PromptStepFit::step_seconds() const { return std::max(0.0, intercept_); }

}  // namespace pdserve::router
