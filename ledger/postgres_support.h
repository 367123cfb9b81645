// What the PostgreSQL stores share (ledger/postgres_ledger.cc, ledger/postgres_budgets.cc only):
// statements' parameters in text form, a result's rows read by column, a statement run with an
// error that names the store, and a URI shown without its password.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pdserve::ledger::pg {

// A double as PostgreSQL reads it back exactly: its shortest exact form, or a named value.
std::string FormatDouble(double v);

// A statement's parameters in text form, in the order bound ($1, $2, ...); see ledger_columns.h.
class Params {
 public:
  void Bind(std::string_view v) { values_.emplace_back(std::string(v)); }
  void Bind(int64_t v) { values_.emplace_back(std::to_string(v)); }
  void Bind(double v) { values_.emplace_back(FormatDouble(v)); }
  void BindNull() { values_.emplace_back(std::nullopt); }
  size_t size() const { return values_.size(); }
  // "$n" for the next value bound.
  std::string Next() const;
  std::vector<const char*> Pointers() const;

 private:
  std::vector<std::optional<std::string>> values_;
};

using ResultPtr = std::unique_ptr<PGresult, decltype(&PQclear)>;

// One row of a query's result, read by column (see ledger_columns.h's Reader).
class ResultRow {
 public:
  ResultRow(const PGresult* result, int row) : result_(result), row_(row) {}
  std::string Text(int col) const;
  int64_t Int(int col) const;
  double Real(int col) const;
  bool IsNull(int col) const { return PQgetisnull(result_, row_, col) != 0; }

 private:
  const PGresult* result_;
  int row_;
};

// Runs `sql` with `params` on `conn`; an error names `what` ("ledger <uri>") and says what
// failed: NotFound for a missing table, Unavailable otherwise.
Result<ResultPtr> Run(pg_conn* conn, const std::string& what, const std::string& sql,
                      const Params& params = {});

// `*conn` connected to `uri` (any connection it held closed first), the server's NOTICEs not
// logged; an error names `what` and why the server could not be reached.
Status Reconnect(const std::string& uri, const std::string& what, pg_conn** conn);

// The password of a URI's user info and of a password= parameter, as "***".
std::string RedactPassword(std::string uri);

// For PQsetNoticeProcessor: the server's NOTICEs are not the gateway's log.
void IgnoreNotice(void*, const char*);

}  // namespace pdserve::ledger::pg
