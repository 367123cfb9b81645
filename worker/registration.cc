#include "worker/registration.h"

#include <unistd.h>

#include <cstdlib>

#include "common/capacity_class.h"
#include "common/worker_name.h"

namespace pdserve::worker {

Status WorkerIdentity::Validate() const {
  if (auto parsed = ParseWorkerCapacityClass(capacity_class); !parsed.ok()) return parsed.status();
  if (!(price_per_gpu_hour >= 0)) return InvalidArgument("price per GPU-hour must be >= 0");
  if (gpu_count < 1) return InvalidArgument("GPU count must be >= 1");
  return Status::Ok();
}

void WorkerIdentity::Fill(proto::Register* r) const {
  r->set_capacity_class(capacity_class);
  r->set_price_per_gpu_hour(price_per_gpu_hour);
  r->set_gpu_count(gpu_count);
  r->set_zone(zone);
  r->set_cluster_token(cluster_token);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const char* slurm_job = std::getenv("SLURM_JOB_ID");
  r->set_name(name.empty() ? WorkerName(host, ::getpid(), slurm_job ? slurm_job : "") : name);
}

proto::Register RegisterFor(const std::string& role, model::Engine& engine,
                            const WorkerIdentity& identity) {
  proto::Register r;
  r.set_role(role);
  identity.Fill(&r);
  r.set_device(engine.backend().device());
  r.set_kv_pages(engine.pages().num_pages());
  r.set_page_size(engine.backend().kv_shape().page_size);
  r.set_model_id(engine.config().model_id);
  r.set_max_context(engine.config().max_seq_len);
  r.set_max_batch_tokens(engine.max_batch_tokens());
  r.set_kv_lookahead_tokens(engine.kv_lookahead_tokens());
  return r;
}

}  // namespace pdserve::worker
