// PostgresLeadership: which of the gateways sharing a PostgreSQL ledger acts for the planner
// (`--planner act`); the others advise only (gateway/planner_advisor.h asks Lead() each tick). The
// leader holds a session-level advisory lock on a connection of its own; the lock ends with the
// session, so a leader that dies (its process, its host, its network) frees it: at once when its
// connection closes, and at most the lease (the session's TCP keepalives: `lease`) after its
// packets stop. A thread of its own tries for the lock, and checks that a held one's session
// still answers, every `check_every`; Lead() reads what it found last, so the caller (the
// gateway's planner tick, on an I/O thread) never waits on the database.
//
// A leader that cannot reach the database is no longer the leader (Lead() false from its next
// check), whether or not the server has ended its session yet, so that two never act at once
// for longer than a check.
//
// Threads: any.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"

struct pg_conn;

namespace pdserve::ledger {

class PostgresLeadership {
 public:
  // Starts the checking thread. `uri`: a postgresql:// URI.
  PostgresLeadership(std::string uri, std::chrono::seconds lease = std::chrono::seconds(10),
                     std::chrono::milliseconds check_every = std::chrono::seconds(1));
  ~PostgresLeadership();  // ends the session, and the lock with it
  PostgresLeadership(const PostgresLeadership&) = delete;
  PostgresLeadership& operator=(const PostgresLeadership&) = delete;

  // Whether this gateway leads, as of the last check.
  bool Lead() const { return leading_.load(); }

 private:
  void Run();
  void Check();                      // the thread's
  Status LeadOrWhyNot(bool* leads);  // the thread's

  const std::string uri_, shown_;
  const std::chrono::seconds lease_;
  const std::chrono::milliseconds check_every_;
  pg_conn* conn_ = nullptr;  // the thread's
  bool told_ = false;        // the thread's: the last failure was logged
  std::atomic<bool> leading_{false};
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace pdserve::ledger
