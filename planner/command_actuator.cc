#include "planner/command_actuator.h"

#include "planner/command_runner.h"

namespace pdserve::planner {

Status CommandActuator::SetBurstWorkers(Pool pool, int count) {
  const std::string pool_name = PoolName(pool), n = std::to_string(count);
  std::string drain_first;
  for (const std::string& name : drain_order_[pool]) {
    drain_first += (drain_first.empty() ? "" : ",") + name;
  }
  auto ran = RunCommand({options_.program, pool_name, "burst", n}, options_.timeout,
                        {{"PDSERVE_POOL", pool_name},
                         {"PDSERVE_CLASS", "burst"},
                         {"PDSERVE_COUNT", n},
                         {"PDSERVE_DRAIN_FIRST", drain_first}});
  if (!ran.ok()) return ran.status();
  if (ran->exit_status != 0) return Unavailable(DescribeFailure(options_.program, *ran));
  return Status::Ok();
}

}  // namespace pdserve::planner
