// CommandActuator: the actuator for any orchestrator pdserve does not speak: it runs an
// operator's program as `PROGRAM POOL CLASS COUNT` (e.g. `scale.sh decode burst 3`), with
// PDSERVE_POOL, PDSERVE_CLASS and PDSERVE_COUNT in its environment too (and PDSERVE_DRAIN_FIRST:
// the drain order's worker names, comma-separated, the idlest first, for a program that can
// choose which to let go), whenever the planner's
// count changes (and again now and then: the program must treat the same count as nothing to
// do). A non-zero exit is an error, with the last line it printed.
//
// Threads: one caller at a time (planner/actuator.h).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "planner/actuator.h"

namespace pdserve::planner {

struct CommandActuatorOptions {
  std::string program;  // a path, or a name on PATH
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

class CommandActuator : public Actuator {
 public:
  explicit CommandActuator(CommandActuatorOptions options) : options_(std::move(options)) {}
  Status SetBurstWorkers(Pool pool, int count) override;
  void SetDrainOrder(Pool pool, std::vector<std::string> names) override {
    drain_order_[pool] = std::move(names);
  }
  std::string Describe() const override { return "command (" + options_.program + ")"; }

 private:
  CommandActuatorOptions options_;
  std::map<Pool, std::vector<std::string>> drain_order_;  // SetDrainOrder's
};

}  // namespace pdserve::planner
