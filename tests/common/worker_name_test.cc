// A worker's registered name made and read back: the pid an actuator signals, the Slurm job it
// cancels; names it did not make are not read as ones it did.
#include "common/worker_name.h"

#include <gtest/gtest.h>

namespace pdserve {
namespace {

TEST(WorkerNameTest, RoundTripsHostPidAndSlurmJob) {
  EXPECT_EQ(WorkerName("node-3", 4242, ""), "node-3:4242");
  EXPECT_EQ(WorkerName("node-3", 4242, "917"), "node-3:4242@slurm:917");
  auto plain = ParseWorkerName("pdserve-decode-burst-7d9f-x2:17");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->host, "pdserve-decode-burst-7d9f-x2");
  EXPECT_EQ(plain->pid, 17);
  EXPECT_EQ(plain->slurm_job, "");
  auto job = ParseWorkerName(WorkerName("gpu01", 99, "123_4"));
  ASSERT_TRUE(job);
  EXPECT_EQ(job->host, "gpu01");
  EXPECT_EQ(job->pid, 99);
  EXPECT_EQ(job->slurm_job, "123_4");
}

TEST(WorkerNameTest, OtherNamesAreNotRead) {
  for (const char* name :
       {"", "sim-prefill-1", ":12", "host:", "host:12x", "host:-3", "host:0", "host:12@slurm:"}) {
    EXPECT_FALSE(ParseWorkerName(name)) << name;
  }
}

}  // namespace
}  // namespace pdserve
