// CommandActuator with a script standing in for an operator's: it is run as PROGRAM POOL burst
// COUNT with the same in its environment, and a failing script's exit and last line come back
// as the error.
#include "planner/command_actuator.h"

#include <gtest/gtest.h>

#include "tests/planner/fake_programs.h"

namespace pdserve::planner {
namespace {

TEST(CommandActuatorTest, RunsTheProgramWithPoolClassAndCount) {
  testing::TempDir dir;
  const std::string calls = dir / "calls";
  const std::string script = testing::WriteScript(
      dir / "scale.sh",
      "echo \"$1 $2 $3 $PDSERVE_POOL $PDSERVE_CLASS $PDSERVE_COUNT [$PDSERVE_DRAIN_FIRST]\" >> " +
          calls + "\n");
  CommandActuator actuator({script});
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 3).ok());
  actuator.SetDrainOrder(Pool::kPrefill, {"h1:10", "h2:20"});
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kPrefill, 0).ok());
  EXPECT_EQ(testing::ReadText(calls),
            "decode burst 3 decode burst 3 []\nprefill burst 0 prefill burst 0 [h1:10,h2:20]\n");
  EXPECT_EQ(actuator.Describe(), "command (" + script + ")");
}

TEST(CommandActuatorTest, AFailingProgramIsAnErrorWithItsLastLine) {
  testing::TempDir dir;
  const std::string script = testing::WriteScript(
      dir / "scale.sh", "echo trying\necho 'quota exceeded for gpu-a100' >&2\nexit 2\n");
  CommandActuator actuator({script});
  const Status s = actuator.SetBurstWorkers(Pool::kDecode, 1);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("exited with status 2: quota exceeded for gpu-a100"),
            std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace pdserve::planner
