// What a worker tells the gateway when it registers (docs/architecture.md, "Wire protocols"): how
// it is billed and where it runs (WorkerIdentity, from its flags), and what it serves (its
// device, KV pool, model and context, read from its engine). Called once by each worker at
// start-up; the Register is sent again as it is on every reconnect.
#pragma once

#include <string>

#include "common/status.h"
#include "model/engine.h"
#include "proto/control.pb.h"

namespace pdserve::worker {

// What every worker kind tells the gateway about how it is billed and where it runs.
struct WorkerIdentity {
  std::string capacity_class = "reserved";  // or "burst"
  double price_per_gpu_hour = 0.0;          // USD
  int gpu_count = 1;
  std::string zone = "local";  // KV crossing zones is charged egress
  std::string cluster_token;
  // The worker's name in the gateway's logs and ledger; empty: host:pid. `pdserve sim` names
  // the many workers of its process apart.
  std::string name;

  // Says which field is wrong.
  Status Validate() const;
  // Sets these fields and the worker's name (host:pid) on a Register.
  void Fill(proto::Register* r) const;
};

// A Register for a worker of `role` ("prefill", "decode" or "both") serving `engine`: the
// identity's fields, and the engine's device, KV pages, page size, model id and context. The
// role's own fields (a decode worker's KV endpoint, the KV layout hash) are the caller's.
proto::Register RegisterFor(const std::string& role, model::Engine& engine,
                            const WorkerIdentity& identity);

}  // namespace pdserve::worker
