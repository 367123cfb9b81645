#include "bench/serve/load_generator.h"

#include <time.h>

#include <cmath>
#include <cstdio>
#include <deque>

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

Result<std::vector<PreparedRequest>> BuildRequests(const std::vector<BenchPrompt>& prompts,
                                                   const RequestBodyOptions& options) {
  json extra = json::object();
  if (!options.extra_body_json.empty()) {
    extra = json::parse(options.extra_body_json, nullptr, /*allow_exceptions=*/false);
    if (extra.is_discarded() || !extra.is_object()) {
      return InvalidArgument("--extra-body must be a JSON object");
    }
  }
  bool chat = IsChat(options.endpoint);
  std::vector<PreparedRequest> requests;
  requests.reserve(prompts.size());
  for (const BenchPrompt& p : prompts) {
    json body = {
        {"model", options.model}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
    if (chat) {
      body["messages"] = json::array({{{"role", "user"}, {"content", p.prompt}}});
      body["max_completion_tokens"] = p.output_len;
    } else {
      body["prompt"] = p.prompt;
      body["max_tokens"] = p.output_len;
    }
    if (options.ignore_eos) body["ignore_eos"] = true;
    body.update(extra);
    requests.push_back({body.dump(), p.prompt_tokens, p.output_len});
  }
  return requests;
}

namespace {

// The run's state; lives on RunLoad's stack, touched only by the io_context thread.
struct Dispatcher {
  const LoadOptions& options;
  const std::vector<PreparedRequest>& requests;
  const std::vector<double>& offsets;
  StreamingHttpClient& client;
  net::steady_timer& arrivals;
  net::steady_timer& progress;
  Clock::time_point epoch;
  LoadRun& run;
  size_t next_arrival = 0;
  std::deque<size_t> ready{};
  int64_t in_flight = 0;
  size_t completed = 0;
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
      size_t i = ready.front();
      ready.pop_front();
      ++in_flight;
      run.max_concurrent_requests = std::max(run.max_concurrent_requests, in_flight);
      StreamRequest request{static_cast<int64_t>(i), options.endpoint, &requests[i].body,
                            requests[i].prompt_tokens};
      client.Send(request, [this](RequestRecord record) { OnDone(std::move(record)); });
    }
  }

  void OnDone(RequestRecord record) {
    --in_flight;
    ++completed;
    if (!record.success) ++failed;
    size_t index = static_cast<size_t>(record.index);
    run.records[index] = std::move(record);
    if (completed == requests.size()) {
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
    double fraction = requests.empty() ? 1.0 : static_cast<double>(completed) / requests.size();
    int filled = static_cast<int>(fraction * kWidth);
    double elapsed = std::chrono::duration<double>(Clock::now() - epoch).count();
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%s [%s] %zu/%zu  failed %lld  in flight %lld  %.1f s%s",
                 options.progress_label.c_str(), bar.c_str(), completed, requests.size(),
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

}  // namespace

Result<LoadRun> RunLoad(const HttpTarget& target, const LoadOptions& options,
                        const std::vector<PreparedRequest>& requests) {
  if (!(options.client.request_timeout_s > 0)) {
    return InvalidArgument("the request timeout must be > 0 s");
  }
  PDSERVE_ASSIGN_OR_RETURN(
      std::vector<double> offsets,
      ArrivalOffsets(static_cast<int64_t>(requests.size()),
                     {options.request_rate, options.burstiness, options.seed}));
  LoadRun run;
  run.records.resize(requests.size());
  if (requests.empty()) return run;

  net::io_context io(1);
  net::steady_timer arrivals(io), progress(io);
  Clock::time_point epoch = Clock::now();
  StreamingHttpClient client(io, target, options.client, epoch);
  PDSERVE_RETURN_IF_ERROR(client.Resolve());
  Dispatcher dispatcher{options, requests, offsets, client, arrivals, progress, epoch,
                        run,     0,        {},      0,      0,        0,        {}};
  double cpu_start = ThreadCpuSeconds();
  net::post(io, [&] { dispatcher.OnArrivalTimer(); });
  if (options.show_progress) dispatcher.ScheduleProgress();
  io.run();
  run.generator_cpu_s = ThreadCpuSeconds() - cpu_start;
  run.duration_s = std::chrono::duration<double>(dispatcher.end - epoch).count();
  run.connections_opened = client.connections_opened();
  if (options.output_counter) {
    for (RequestRecord& r : run.records) {
      if (!r.success || r.output_token_source == TokenCountSource::kServerUsage) continue;
      r.output_tokens = options.output_counter(r.generated_text);
      r.output_token_source = TokenCountSource::kTokenizer;
    }
  }
  return run;
}

}  // namespace pdserve::bench
