// WorkerRegistry: the gateway's side of the control plane. Accepts worker connections, checks
// each Register (cluster token, model), keeps the live workers with their latest Load, routes a
// request to a worker, and hands the worker's TokenBatch and RequestError messages to that
// request's sink. A worker that disconnects or misses heartbeats leaves the registry and every
// request it held fails over to its sink (retryable if no token reached it yet).
//
// Threads: all methods may be called from any thread (one mutex guards the tables). Sinks are
// called from the io_context's threads, never while the mutex is held.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "common/framed_connection.h"
#include "common/status.h"

namespace pdserve::gateway {

// What a request's owner (an HTTP session) receives from its worker.
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  virtual void OnTokens(const proto::TokenBatch& batch) = 0;
  // The request ended without finishing: the worker refused it or was lost.
  virtual void OnFailure(const std::string& message, bool retryable) = 0;
};

struct RegistryOptions {
  std::string cluster_token;  // empty: any worker may join (local use)
  std::string model_id;       // workers must serve this model
  std::chrono::milliseconds heartbeat_timeout{3000};
};

struct WorkerSummary {
  uint64_t id;
  std::string role, capacity_class, name;
  int free_pages, running, inflight;
  bool draining;
};

class WorkerRegistry : public std::enable_shared_from_this<WorkerRegistry> {
 public:
  WorkerRegistry(boost::asio::io_context& io, RegistryOptions options);

  // Binds the control port (0: chosen by the OS) and starts accepting workers.
  Status Listen(const std::string& host, uint16_t port);
  uint16_t port() const { return port_; }
  void Stop();

  // Sends `request` to the least-loaded live worker not in `exclude`. Unavailable when none.
  Result<uint64_t> Dispatch(const proto::Generate& request, std::shared_ptr<RequestSink> sink,
                            const std::set<uint64_t>& exclude = {});
  // Asks the worker to stop the request; its sink gets no more calls.
  void Cancel(uint64_t request_id);

  std::vector<WorkerSummary> Workers() const;
  // A worker's registration (capacity class, price) for accounting; nullopt once it is gone.
  std::optional<proto::Register> Registration(uint64_t worker_id) const;

 private:
  struct Worker {
    uint64_t id = 0;
    proto::Register info;
    proto::Load load;
    std::shared_ptr<FramedConnection> conn;
    std::chrono::steady_clock::time_point last_seen;
    std::set<uint64_t> requests;
    bool registered = false;
  };
  struct InFlight {
    uint64_t worker_id;
    std::shared_ptr<RequestSink> sink;
  };

  void Accept();
  void OnMessage(uint64_t conn_id, proto::Envelope&& message);
  void OnClose(uint64_t conn_id, const Status& why);
  void SweepHeartbeats();

  boost::asio::io_context& io_;
  RegistryOptions options_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer sweep_timer_;
  uint16_t port_ = 0;

  mutable std::mutex mu_;
  uint64_t next_id_ = 1;                   // guarded by mu_
  std::map<uint64_t, Worker> workers_;     // by connection id; guarded by mu_
  std::map<uint64_t, InFlight> requests_;  // by request id; guarded by mu_
};

}  // namespace pdserve::gateway
