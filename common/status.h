// Status and Result<T>: how pdserve code reports failure. Cheap when OK (no allocation), a code
// plus a human-readable message when not. Functions that can fail return one of these; both are
// [[nodiscard]] so a caller cannot drop an error by accident. Value types: safe to copy and move
// between threads, not to share mutably.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace pdserve {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller (a client, a peer, a file) sent something malformed
  kNotFound,            // a named file, tensor, model or request does not exist
  kAlreadyExists,       //
  kOutOfRange,          // a value past a limit (context length, page count)
  kResourceExhausted,   // no free KV pages, queue full, quota spent
  kFailedPrecondition,  // the object is in the wrong state for the call
  kUnavailable,         // a peer is gone or not reachable; retrying elsewhere may work
  kDeadlineExceeded,    //
  kCancelled,           //
  kDataLoss,            // a checksum mismatch or a truncated file
  kUnimplemented,       // a valid request for something pdserve does not support
  kInternal,            // a broken invariant
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "InvalidArgument: message", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "context: message"; OK stays OK.
  Status WithContext(std::string_view context) const;

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Result<T> holds either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(value_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(value_);
  }
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> value_;
};

}  // namespace pdserve

// Returns the Status from the enclosing function when `expr` is not OK.
#define PDSERVE_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::pdserve::Status pdserve_status_ = (expr);        \
    if (!pdserve_status_.ok()) return pdserve_status_; \
  } while (0)

#define PDSERVE_CONCAT_INNER(a, b) a##b
#define PDSERVE_CONCAT(a, b) PDSERVE_CONCAT_INNER(a, b)
// `PDSERVE_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a Result or returns its Status.
#define PDSERVE_ASSIGN_OR_RETURN(lhs, expr)                    \
  auto PDSERVE_CONCAT(pdserve_result_, __LINE__) = (expr);     \
  if (!PDSERVE_CONCAT(pdserve_result_, __LINE__).ok())         \
    return PDSERVE_CONCAT(pdserve_result_, __LINE__).status(); \
  lhs = std::move(PDSERVE_CONCAT(pdserve_result_, __LINE__)).value()
