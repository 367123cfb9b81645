// What the PostgreSQL stores share; see postgres_support.h.
#include "ledger/postgres_support.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace pdserve::ledger::pg {

std::string FormatDouble(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char text[32];
  auto end = std::to_chars(text, text + sizeof text, v).ptr;
  return std::string(text, end);
}

std::string Params::Next() const {
  std::string n = std::to_string(values_.size() + 1);
  n.insert(n.begin(), '$');
  return n;
}

std::vector<const char*> Params::Pointers() const {
  std::vector<const char*> p;
  p.reserve(values_.size());
  for (const auto& v : values_) p.push_back(v ? v->c_str() : nullptr);
  return p;
}

std::string ResultRow::Text(int col) const {
  return std::string(PQgetvalue(result_, row_, col), PQgetlength(result_, row_, col));
}

int64_t ResultRow::Int(int col) const {
  int64_t v = 0;
  const char* p = PQgetvalue(result_, row_, col);
  std::from_chars(p, p + PQgetlength(result_, row_, col), v);
  return v;
}

double ResultRow::Real(int col) const {
  double v = 0;
  const char* p = PQgetvalue(result_, row_, col);
  std::from_chars(p, p + PQgetlength(result_, row_, col), v);
  return v;
}

Result<ResultPtr> Run(pg_conn* conn, const std::string& what, const std::string& sql,
                      const Params& params) {
  const std::vector<const char*> values = params.Pointers();
  ResultPtr result(PQexecParams(conn, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                values.data(), nullptr, nullptr, 0),
                   &PQclear);
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
  std::string message = PQerrorMessage(conn);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
    message.pop_back();
  }
  const char* state = result ? PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) : nullptr;
  // 42P01: undefined table: the database has no ledger.
  if (state && std::string_view(state) == "42P01") return NotFound(what + ": " + message);
  return Unavailable(what + ": " + message);
}

Status Reconnect(const std::string& uri, const std::string& what, pg_conn** conn) {
  if (*conn) PQfinish(*conn);
  *conn = PQconnectdb(uri.c_str());
  if (!*conn || PQstatus(*conn) != CONNECTION_OK) {
    std::string message = *conn ? PQerrorMessage(*conn) : "out of memory";
    while (!message.empty() && message.back() == '\n') message.pop_back();
    if (*conn) PQfinish(*conn);
    *conn = nullptr;
    return Unavailable(what + ": cannot connect: " + message);
  }
  PQsetNoticeProcessor(*conn, IgnoreNotice, nullptr);
  return Status::Ok();
}

std::string RedactPassword(std::string uri) {
  const size_t start = uri.find("://");
  if (start != std::string::npos) {
    const size_t host = start + 3;
    const size_t end = std::min(uri.find_first_of("/?", host), uri.size());
    const size_t at = uri.rfind('@', end);
    if (at != std::string::npos && at > host) {
      const size_t colon = uri.find(':', host);
      if (colon != std::string::npos && colon < at) uri.replace(colon + 1, at - colon - 1, "***");
    }
  }
  for (size_t p = uri.find("password="); p != std::string::npos; p = uri.find("password=", p + 1)) {
    const size_t value = p + 9;
    const size_t end = std::min(uri.find('&', value), uri.size());
    uri.replace(value, end - value, "***");
  }
  return uri;
}

void IgnoreNotice(void*, const char*) {}

}  // namespace pdserve::ledger::pg
