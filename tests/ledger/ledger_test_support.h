// What the ledger's tests share: rows and workers to write, a ledger opened or the test failed,
// and SQL run on the file as an outside reader or writer would. Tests only.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <memory>
#include <string>

#include "ledger/ledger.h"

namespace pdserve::ledger::test_support {

inline WorkerRef Worker(uint64_t id, CapacityClass cls, double price, int gpus = 1) {
  return {id, "w" + std::to_string(id), "both", cls, "zone-a", price, gpus};
}

inline AttemptRow Row(const std::string& id, const std::string& tenant, double end,
                      int attempt = 1) {
  AttemptRow r;
  r.request_id = id;
  r.attempt = attempt;
  r.tenant = tenant;
  r.model = "tiny";
  r.endpoint = "chat";
  r.status = AttemptStatus::kOk;
  r.finish_reason = "stop";
  r.arrival_unix = end - 2;
  r.first_token_unix = end - 1;
  r.end_unix = end;
  r.prompt_tokens = 10;
  r.completion_tokens = 5;
  r.prefill_worker = Worker(1, CapacityClass::kReserved, 2.0);
  r.decode_worker = Worker(2, CapacityClass::kBurst, 3.5, 2);
  r.prefill_step_seconds = 0.25;
  r.decode_step_seconds = 0.5;
  r.cost = {0.0003, 0.0005, 0, 0.0002};
  return r;
}

inline std::unique_ptr<Ledger> OpenOrDie(const std::string& path, bool store_text = false) {
  auto ledger = Ledger::Open({path, store_text});
  EXPECT_TRUE(ledger.ok()) << ledger.status().ToString();
  return ledger.ok() ? std::move(*ledger) : nullptr;
}

inline void RawSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;
}

// The first column of the first row `sql` gives, read from the file as an outside reader would.
inline double RawNumber(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
  const double value = sqlite3_step(stmt) == SQLITE_ROW ? sqlite3_column_double(stmt, 0) : -1;
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return value;
}
inline double UserVersion(const std::string& path) {
  return RawNumber(path, "PRAGMA user_version");
}

}  // namespace pdserve::ledger::test_support
