// PerformanceProfile: a worker's step time as a function of the work in the step, fitted from
// measured steps (docs/architecture.md, "The capacity layer"), with what its KV costs to move,
// how many pages it holds, how long it takes to start, and where the figures came from. The
// simulated backend (model/sim/) takes each step's time from it; admission and the planner read
// the same file. `pdserve bench engine --profile-out FILE` writes one; `profiles/` keeps those
// measured. An immutable value once loaded: safe to read from any thread.
//
// The step-time model, in seconds (coefficients fitted by least squares of relative errors,
// none negative):
//   a step with prompt work: prefill time + decode.per_token * decode tokens
//                            + decode.per_context * context
//   a decode-only step:      decode time
// where the prefill time is prefill_curve.At(prompt tokens, prompt attention) and the decode
// time decode_curve.At(decode tokens, context) when the profile has those curves (the time
// measured at each prompt length and batch size: a step's time is not linear in them, as a batch
// of one running a different kernel than a batch of two shows), else the linear models:
//   prefill.base + prefill.per_token * prompt tokens + prefill.per_context * prompt attention
//   decode.base + decode.per_token * decode tokens + decode.per_context * context
// Prompt attention counts the (query, key) pairs of the step's prompt chunks and context the
// tokens the decoding sequences attend to (StepShape).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace pdserve::model {

// What one engine step computes, as the step-time model sees it.
struct StepShape {
  int prompt_tokens = 0;         // prompt tokens whose KV the step computes
  int64_t prompt_attention = 0;  // sum over prompt chunks: n * start + n * (n + 1) / 2
  int decode_tokens = 0;         // sequences decoding one token each
  int64_t decode_context = 0;    // sum over those sequences of the tokens each attends to
  int max_context = 0;           // the longest sequence in the step (position + 1)
};

// The shape of a chunk of `tokens` tokens starting at `start` added to `shape`.
void AddPromptChunk(StepShape& shape, int start, int tokens);
void AddDecodeToken(StepShape& shape, int position);

// seconds = base + per_token * x + per_context * y.
struct LinearStepModel {
  double base = 0;
  double per_token = 0;
  double per_context = 0;
};

// A step's time at each measured count x of work (prompt tokens, or decode sequences) with no
// context, plus a slope in context: At(x, y) = the points' value at x + per_context * y. Between
// points it is linear; beyond either end it follows the nearest segment, never below 0.
struct MeasuredCurve {
  std::vector<std::pair<int, double>> points;  // (x, seconds), x strictly ascending
  double per_context = 0;

  bool empty() const { return points.empty(); }
  double At(int x, double y) const;
};

// The largest work of each kind the profile measured: a step beyond it is extrapolated.
struct ProfiledRange {
  int prompt_tokens = 0;  // per step
  int decode_tokens = 0;  // per step (batch)
  int max_context = 0;    // tokens of the longest sequence
};

struct PerformanceProfile {
  // Provenance.
  std::string name;                                       // file name without .json, or "zero"
  std::string device;                                     // "cpu", "cuda:0"
  std::string device_name;                                // CPU model or GPU name
  std::string model_id;                                   // the model measured
  nlohmann::json model_shape = nlohmann::json::object();  // its config.json fields
  std::string dtype;
  int threads = 0;      // CPU threads of the engine measured
  std::string command;  // what produced it
  std::string date;     // ISO 8601, UTC

  LinearStepModel prefill;  // steps with prompt work
  LinearStepModel decode;   // decode-only steps; its slopes also price a mixed step's decode
  MeasuredCurve prefill_curve, decode_curve;  // empty in profiles measured before them
  ProfiledRange range;
  // Median relative error of StepSeconds over the measured steps of each kind.
  double prefill_fit_error = 0;
  double decode_fit_error = 0;
  int samples = 0;

  double kv_bytes_per_token = 0;   // every layer's K and V of one token, in the KV dtype
  double kv_bytes_per_second = 0;  // between a prefill and a decode worker; 0: instant
  std::string kv_bandwidth_source;
  int n_layers = 1;  // layers (KV moves layer by layer)
  int page_size = 16;
  int kv_pages = 0;               // KV pages of the worker measured
  int max_batch_tokens = 0;       // the engine's step budget when measured
  double cold_start_seconds = 0;  // process start to ready to register
  // A decode worker's time between two decode steps in a row, outside both (sending the tokens,
  // reading messages), as measured in service (`pdserve profile calibrate`); 0: not measured.
  // A simulated worker's next decode step ends no sooner than this plus its step time after
  // the last one ended, so that its token rate matches a real worker's.
  double decode_gap_seconds = 0;
  // How served steps of each kind spread about the profile's time, as measured in service
  // (`pdserve profile calibrate`): the quantiles of a step's time over its prediction at
  // probabilities (i + 0.5) / n, ascending. Empty: a step takes its predicted time. A simulated
  // worker draws each step's factor from them (SpreadFactor), so that its steps' mean and
  // spread, which a queue's wait and a token's mean time answer to, match a real worker's.
  std::vector<double> prefill_spread, decode_spread;

  // The step's predicted wall time.
  double StepSeconds(const StepShape& shape) const;
  // Empty when the shape lies within the measured range; otherwise what lies outside it.
  std::string OutsideRange(const StepShape& shape) const;

  static Result<PerformanceProfile> FromJson(const nlohmann::json& j, const std::string& source);
  nlohmann::json ToJson() const;
  static Result<PerformanceProfile> Load(const std::string& path);
  Status Save(const std::string& path) const;
  // A profile in which every step and transfer takes no time (pdserve's own overhead).
  static PerformanceProfile Zero();
};

// The factor at probability u in [0, 1) of a spread (PerformanceProfile::prefill_spread): linear
// between its quantiles, held at the outermost beyond them; 1 for an empty spread.
double SpreadFactor(const std::vector<double>& spread, double u);

// One measured step.
struct StepSample {
  StepShape shape;
  double seconds = 0;
};

// Fits seconds = base + per_token * x + per_context * y by least squares of the relative
// errors (each sample weighted by 1 / seconds^2), dropping a feature
// whose coefficient would come out negative (noise) and fitting again. InvalidArgument with
// fewer than 3 samples or samples that are not finite.
Result<LinearStepModel> FitLinearStepModel(const std::vector<double>& x,
                                           const std::vector<double>& y,
                                           const std::vector<double>& seconds);

// Fits a curve through the steps' times at each distinct x with one slope in y, by least squares
// of the relative errors: the slope from how time moves with y among steps of the same x, each
// point the weighted mean of its steps' time less the slope's part. Empty (no curve) with fewer
// than two distinct x; InvalidArgument for columns of different lengths or values not finite.
Result<MeasuredCurve> FitMeasuredCurve(const std::vector<double>& x, const std::vector<double>& y,
                                       const std::vector<double>& seconds);

// Fits both kinds' linear models and curves from measured steps (those with prompt work to
// prefill, the rest to decode) and fills range, fit errors and samples; provenance and KV figures
// are left to the caller.
Status FitProfile(const std::vector<StepSample>& steps, PerformanceProfile* profile);

// Where `name_or_path` leads: an existing file as given, else PROFILES_DIR/NAME.json for each
// directory in `search` (profiles/ beside the binary's checkout and in the working directory).
// "zero" is the built-in Zero(). NotFound lists where it looked.
Result<PerformanceProfile> FindProfile(const std::string& name_or_path);

}  // namespace pdserve::model
