#include "bench/serve/load_generator.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <iterator>

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "bench/serve/arrivals.h"

namespace pdserve::bench {

namespace net = boost::asio;
using Clock = StreamingHttpClient::Clock;
using nlohmann::json;

namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

bool IsChat(std::string_view endpoint) {
  return endpoint.find("chat/completions") != std::string_view::npos;
}

}  // namespace

Result<json> ParseExtraBody(const std::string& extra_body_json) {
  if (extra_body_json.empty()) return json::object();
  json extra = json::parse(extra_body_json, nullptr, /*allow_exceptions=*/false);
  if (extra.is_discarded() || !extra.is_object()) {
    return InvalidArgument("--extra-body must be a JSON object");
  }
  return extra;
}

std::string RequestBody(const RequestBodyOptions& options, const json& extra, json input,
                        int64_t max_tokens) {
  json body = {
      {"model", options.model}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  if (input.is_array()) {
    body["messages"] = std::move(input);
    body["max_completion_tokens"] = max_tokens;
  } else {
    body["prompt"] = std::move(input);
    body["max_tokens"] = max_tokens;
  }
  if (options.ignore_eos) body["ignore_eos"] = true;
  body.update(extra);
  return body.dump();
}

Result<std::vector<PreparedRequest>> BuildRequests(const std::vector<BenchPrompt>& prompts,
                                                   const RequestBodyOptions& options) {
  PDSERVE_ASSIGN_OR_RETURN(json extra, ParseExtraBody(options.extra_body_json));
  bool chat = IsChat(options.endpoint);
  std::vector<PreparedRequest> requests;
  requests.reserve(prompts.size());
  for (const BenchPrompt& p : prompts) {
    json input = chat ? json::array({{{"role", "user"}, {"content", p.prompt}}}) : json(p.prompt);
    requests.push_back({RequestBody(options, extra, std::move(input), p.output_len),
                        p.prompt_tokens, p.output_len});
  }
  return requests;
}

namespace {

// The run's state; lives on RunScript's stack, touched only by the io_context thread.
struct Dispatcher {
  const LoadOptions& options;
  LoadScript& script;
  const std::vector<double>& offsets;
  StreamingHttpClient& client;
  net::steady_timer& arrivals;
  net::steady_timer& progress;
  Clock::time_point epoch;
  LoadRun& run;
  size_t next_arrival = 0;
  std::deque<size_t> ready{};
  int64_t in_flight = 0;  // units
  size_t units_done = 0;
  size_t completed = 0;  // requests
  int64_t failed = 0;
  Clock::time_point end{};

  void OnArrivalTimer() {
    double now_s = std::chrono::duration<double>(Clock::now() - epoch).count();
    while (next_arrival < offsets.size() && offsets[next_arrival] <= now_s) {
      ready.push_back(next_arrival++);
    }
    Dispatch();
    if (next_arrival < offsets.size()) {
      arrivals.expires_at(epoch + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(offsets[next_arrival])));
      arrivals.async_wait([this](boost::system::error_code ec) {
        if (!ec) OnArrivalTimer();
      });
    }
  }

  void Dispatch() {
    while (!ready.empty() &&
           (options.max_concurrency <= 0 || in_flight < options.max_concurrency)) {
      size_t unit = ready.front();
      ready.pop_front();
      ++in_flight;
      run.max_concurrent_requests = std::max(run.max_concurrent_requests, in_flight);
      SendNext(unit, nullptr);
    }
  }

  // Sends the unit's next request, or ends the unit when it has none.
  void SendNext(size_t unit, RequestRecord* last) {
    std::optional<StreamRequest> request = script.Next(unit, last);
    if (!request) return EndUnit();
    client.Send(*request, [this, unit](RequestRecord record) {
      ++completed;
      if (!record.success) ++failed;
      RequestRecord& slot = run.records[static_cast<size_t>(record.index)];
      slot = std::move(record);
      SendNext(unit, &slot);
    });
  }

  void EndUnit() {
    --in_flight;
    ++units_done;
    if (units_done == script.units()) {
      end = Clock::now();
      arrivals.cancel();
      progress.cancel();
      client.CloseIdle();
      if (options.show_progress) DrawProgress(/*final=*/true);
      return;
    }
    Dispatch();
  }

  void DrawProgress(bool final) {
    constexpr int kWidth = 30;
    size_t total = script.max_requests();
    double fraction = total == 0 ? 1.0 : static_cast<double>(completed) / total;
    int filled = static_cast<int>(fraction * kWidth);
    double elapsed = std::chrono::duration<double>(Clock::now() - epoch).count();
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%s [%s] %zu/%zu  failed %lld  in flight %lld  %.1f s%s",
                 options.progress_label.c_str(), bar.c_str(), completed, total,
                 static_cast<long long>(failed), static_cast<long long>(in_flight), elapsed,
                 final ? "\n" : "");
    std::fflush(stderr);
  }

  void ScheduleProgress() {
    progress.expires_after(std::chrono::milliseconds(250));
    progress.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      DrawProgress(/*final=*/false);
      ScheduleProgress();
    });
  }
};

// RunLoad's script: request i is unit i.
class PreparedRequestScript : public LoadScript {
 public:
  PreparedRequestScript(const LoadOptions& options, const std::vector<PreparedRequest>& requests)
      : options_(options), requests_(requests) {}
  size_t units() const override { return requests_.size(); }
  size_t max_requests() const override { return requests_.size(); }
  std::optional<StreamRequest> Next(size_t unit, RequestRecord* last) override {
    if (last != nullptr) {
      last->ideal_cached_tokens = requests_[unit].ideal_cached_tokens;
      return std::nullopt;
    }
    const PreparedRequest& r = requests_[unit];
    return StreamRequest{static_cast<int64_t>(unit), options_.endpoint, &r.body, r.prompt_tokens};
  }

 private:
  const LoadOptions& options_;
  const std::vector<PreparedRequest>& requests_;
};

}  // namespace

Result<LoadRun> RunScript(const HttpTarget& target, const LoadOptions& options,
                          LoadScript& script) {
  if (!(options.client.request_timeout_s > 0)) {
    return InvalidArgument("the request timeout must be > 0 s");
  }
  const int64_t units = static_cast<int64_t>(script.units());
  std::vector<double> offsets = options.send_offsets;
  if (offsets.empty()) {
    PDSERVE_ASSIGN_OR_RETURN(
        offsets, ArrivalOffsets(units, {options.request_rate, options.burstiness, options.seed}));
  } else if (static_cast<int64_t>(offsets.size()) != units ||
             !std::is_sorted(offsets.begin(), offsets.end())) {
    return InvalidArgument("send offsets must be one per unit and non-decreasing");
  }
  LoadRun run;
  run.records.resize(script.max_requests());
  if (units == 0) {
    run.records.clear();
    return run;
  }

  net::io_context io(1);
  net::steady_timer arrivals(io), progress(io);
  Clock::time_point epoch = Clock::now();
  StreamingHttpClient client(io, target, options.client, epoch);
  PDSERVE_RETURN_IF_ERROR(client.Resolve());
  Dispatcher dispatcher{options, script, offsets, client, arrivals, progress, epoch, run};
  double cpu_start = ThreadCpuSeconds();
  net::post(io, [&] { dispatcher.OnArrivalTimer(); });
  if (options.show_progress) dispatcher.ScheduleProgress();
  io.run();
  run.generator_cpu_s = ThreadCpuSeconds() - cpu_start;
  run.duration_s = std::chrono::duration<double>(dispatcher.end - epoch).count();
  run.connections_opened = client.connections_opened();
  // Slots a script left unsent keep index -1.
  auto unsent = std::remove_if(run.records.begin(), run.records.end(),
                               [](const RequestRecord& r) { return r.index < 0; });
  run.requests_not_sent = std::distance(unsent, run.records.end());
  run.records.erase(unsent, run.records.end());
  if (options.output_counter) {
    for (RequestRecord& r : run.records) {
      if (!r.success || r.output_token_source == TokenCountSource::kServerUsage) continue;
      r.output_tokens = options.output_counter(r.generated_text);
      r.output_token_source = TokenCountSource::kTokenizer;
    }
  }
  return run;
}

Result<LoadRun> RunLoad(const HttpTarget& target, const LoadOptions& options,
                        const std::vector<PreparedRequest>& requests) {
  PreparedRequestScript script(options, requests);
  return RunScript(target, options, script);
}

}  // namespace pdserve::bench
