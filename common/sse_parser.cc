#include "common/sse_parser.h"

#include <fmt/format.h>

namespace pdserve {

Status SseParser::Feed(std::string_view bytes, const std::function<void(SseEvent&)>& on_event) {
  if (failed_) return DataLoss(fmt::format("an SSE event passed {} bytes", max_event_bytes_));
  for (char c : bytes) {
    if (c == '\n' && last_was_cr_) {
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = (c == '\r');
    if (c == '\r' || c == '\n') {
      ProcessLine(line_, on_event);
      line_.clear();
      continue;
    }
    line_.push_back(c);
    if (line_.size() + pending_.data.size() > max_event_bytes_) {
      failed_ = true;
      return DataLoss(fmt::format("an SSE event passed {} bytes", max_event_bytes_));
    }
  }
  return Status::Ok();
}

void SseParser::Finish(const std::function<void(SseEvent&)>& on_event) {
  if (!line_.empty()) ProcessLine(line_, on_event);
  line_.clear();
  ProcessLine("", on_event);
}

void SseParser::ProcessLine(std::string_view line, const std::function<void(SseEvent&)>& on_event) {
  if (line.empty()) {
    if (has_data_) on_event(pending_);
    pending_ = SseEvent{};
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // a comment, often a keep-alive ping
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) pending_.data.push_back('\n');
    pending_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    pending_.event.assign(value);
  }
}

}  // namespace pdserve
