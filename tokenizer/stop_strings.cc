#include "tokenizer/stop_strings.h"

#include <algorithm>

namespace pdserve::tokenizer {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

std::string StopStringMatcher::Push(std::string_view text) {
  if (stopped_) return {};
  pending_.append(text);
  // The earliest complete stop string wins.
  size_t cut = std::string::npos;
  for (const auto& s : stops_) cut = std::min(cut, pending_.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t n = std::min(s.size() - 1, pending_.size()); n > hold; --n) {
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopStringMatcher::Flush() {
  std::string out;
  out.swap(pending_);
  return stopped_ ? std::string() : out;
}

}  // namespace pdserve::tokenizer
