// The planner's leader among gateways sharing a PostgreSQL ledger; see postgres_leadership.h.
#include "ledger/postgres_leadership.h"

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include "ledger/postgres_support.h"

namespace pdserve::ledger {
namespace {

// "pdpl": the planner's leadership, apart from the schema's lock.
constexpr char kTryLock[] = "SELECT pg_try_advisory_lock(1885630572)";

}  // namespace

PostgresLeadership::PostgresLeadership(std::string uri, std::chrono::seconds lease,
                                       std::chrono::milliseconds check_every)
    : uri_(std::move(uri)),
      shown_("leadership " + pg::RedactPassword(uri_)),
      lease_(lease),
      check_every_(check_every) {
  thread_ = std::thread([this] { Run(); });
}

PostgresLeadership::~PostgresLeadership() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
  if (conn_) PQfinish(conn_);  // the session ends, and its lock with it
}

void PostgresLeadership::Run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    Check();
    lock.lock();
    stop_cv_.wait_for(lock, check_every_, [&] { return stopping_; });
  }
}

void PostgresLeadership::Check() {
  bool leads = false;
  Status s = LeadOrWhyNot(&leads);
  if (!s.ok()) {
    if (!told_) spdlog::warn("planner: not leading: {}", s.ToString());
    told_ = true;
    if (leading_) spdlog::warn("planner: gave up leading (the database did not answer)");
    leading_ = false;
    if (conn_) PQfinish(conn_);  // its session, and the lock if the server still holds it
    conn_ = nullptr;
    return;
  }
  told_ = false;
  if (leads && !leading_) spdlog::info("planner: leading the gateways of {}", shown_);
  leading_ = leads;
}

Status PostgresLeadership::LeadOrWhyNot(bool* leads) {
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
    leading_ = false;  // a new session holds no lock
    // The server ends a silent leader's session (and frees the lock) after about the lease.
    const auto idle = std::max<int64_t>(1, lease_.count() / 2);
    const auto interval = std::max<int64_t>(1, lease_.count() / 4);
    const std::string uri = uri_ + (uri_.find('?') == std::string::npos ? "?" : "&") +
                            "keepalives=1&keepalives_idle=" + std::to_string(idle) +
                            "&keepalives_interval=" + std::to_string(interval) +
                            "&keepalives_count=2&connect_timeout=" + std::to_string(idle);
    PDSERVE_RETURN_IF_ERROR(pg::Reconnect(uri, shown_, &conn_));
    for (const std::string& setting : {"SET tcp_keepalives_idle = " + std::to_string(idle),
                                       "SET tcp_keepalives_interval = " + std::to_string(interval),
                                       std::string("SET tcp_keepalives_count = 2")}) {
      PDSERVE_RETURN_IF_ERROR(pg::Run(conn_, shown_, setting).status());
    }
  }
  if (leading_) {
    // Still ours while the session answers.
    PDSERVE_RETURN_IF_ERROR(pg::Run(conn_, shown_, "SELECT 1").status());
    *leads = true;
    return Status::Ok();
  }
  PDSERVE_ASSIGN_OR_RETURN(pg::ResultPtr result, pg::Run(conn_, shown_, kTryLock));
  *leads = PQntuples(result.get()) == 1 && pg::ResultRow(result.get(), 0).Text(0) == "t";
  return Status::Ok();
}

}  // namespace pdserve::ledger
