// SlurmActuator against stand-ins of sbatch, squeue and scancel: shell scripts that keep the
// "cluster's" jobs in a file, one "ID STATE" a line, and log every call. What it must do:
// submit one job per missing worker with the job name, options and exports; let the newest go
// first, a running job by SIGTERM to its batch step (drained) and a pending one by a plain
// cancel; not count a job it let go while it drains; replace a job that ended on its own; and
// count the jobs a previous gateway left under the same name. tests/e2e/slurm_test.cc runs the
// same against a real single-node Slurm.
#include "planner/slurm_actuator.h"

#include <gtest/gtest.h>

#include "tests/planner/fake_programs.h"

namespace pdserve::planner {
namespace {

// A fake Slurm in `dir`: jobs in dir/jobs ("ID STATE NAME"), calls in dir/calls.
struct FakeSlurm {
  explicit FakeSlurm(const testing::TempDir& dir) : jobs(dir / "jobs"), calls(dir / "calls") {
    std::ofstream(jobs) << "";
    std::ofstream(dir / "next_id") << "100\n";
    options.job_script = dir / "worker.sbatch";
    options.sbatch = testing::WriteScript(
        dir / "sbatch",
        "echo \"sbatch $*\" >> " + calls + "\n" + "id=$(cat " + dir / "next_id" + ")\n" +
            "echo $((id + 1)) > " + dir / "next_id" + "\n" +
            "for a in \"$@\"; do case $a in --job-name=*) name=${a#--job-name=};; esac; done\n" +
            "echo \"$id ${PDSERVE_FAKE_STATE:-RUNNING} $name\" >> " + jobs + "\n" +
            "echo \"$id;cluster\"\n");
    options.squeue = testing::WriteScript(
        dir / "squeue", "echo \"squeue $*\" >> " + calls + "\n" +
                            "for a in \"$@\"; do case $a in --name=*) name=${a#--name=};; esac; "
                            "done\n" +
                            "awk -v n=\"$name\" '$3 == n { print $1, $2 }' " + jobs + "\n");
    options.scancel = testing::WriteScript(
        dir / "scancel", "echo \"scancel $*\" >> " + calls + "\n" + "for id; do :; done\n" +
                             // A signalled job drains for a while: it stays RUNNING.
                             "case \"$*\" in *--signal=TERM*) exit 0;; esac\n" +
                             "awk -v id=\"$id\" '$1 != id' " + jobs + " > " + jobs + ".new && mv " +
                             jobs + ".new " + jobs + "\n");
  }
  std::vector<std::string> Calls(const std::string& program) const {
    std::vector<std::string> out;
    std::istringstream lines(testing::ReadText(calls));
    for (std::string line; std::getline(lines, line);)
      if (line.rfind(program + " ", 0) == 0) out.push_back(line);
    return out;
  }
  void End(const std::string& id) const {
    std::string kept;
    std::istringstream lines(testing::ReadText(jobs));
    for (std::string line; std::getline(lines, line);)
      if (line.rfind(id + " ", 0) != 0) kept += line + "\n";
    std::ofstream(jobs) << kept;
  }
  std::string jobs, calls;
  SlurmActuatorOptions options;
};

TEST(SlurmActuatorTest, SubmitsOneJobPerMissingWorkerWithItsNameOptionsAndExports) {
  testing::TempDir dir;
  FakeSlurm slurm(dir);
  slurm.options.sbatch_args = {"--partition=gpu", "--gres=gpu:1"};
  slurm.options.env = {{"PDSERVE_GATEWAY", "10.0.0.1:9000"}};
  SlurmActuator actuator(slurm.options);
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 2).ok());
  const auto submitted = slurm.Calls("sbatch");
  ASSERT_EQ(submitted.size(), 2u);
  EXPECT_EQ(submitted[0],
            "sbatch --parsable --job-name=pdserve-decode-burst --partition=gpu --gres=gpu:1 "
            "--export=ALL,PDSERVE_POOL=decode,PDSERVE_CLASS=burst,PDSERVE_GATEWAY=10.0.0.1:9000 " +
                slurm.options.job_script + " decode burst");
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 2).ok());
  EXPECT_EQ(slurm.Calls("sbatch").size(), 2u) << "the same count changes nothing";
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kPrefill, 1).ok());
  EXPECT_NE(slurm.Calls("sbatch").back().find("--job-name=pdserve-prefill-burst"),
            std::string::npos);
}

TEST(SlurmActuatorTest, TheNewestRunningJobDrainsAndIsNotCountedWhileItDoes) {
  testing::TempDir dir;
  FakeSlurm slurm(dir);
  SlurmActuator actuator(slurm.options);
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 3).ok());  // jobs 100, 101, 102
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 1).ok());
  EXPECT_EQ(slurm.Calls("scancel"), (std::vector<std::string>{"scancel --full --signal=TERM 102",
                                                              "scancel --full --signal=TERM 101"}));
  // Both still drain (RUNNING in squeue): they are not counted, so nothing more is cancelled.
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 1).ok());
  EXPECT_EQ(slurm.Calls("scancel").size(), 2u);
  EXPECT_EQ(slurm.Calls("sbatch").size(), 3u);
}

// The gateway's drain order names its idlest workers with their jobs ("host:pid@slurm:JOB"):
// those jobs go before the newest; a pending job goes before any, having nothing to drain.
TEST(SlurmActuatorTest, PendingJobsThenTheDrainOrdersJobsGoFirst) {
  testing::TempDir dir;
  FakeSlurm slurm(dir);
  SlurmActuator actuator(slurm.options);
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 3).ok());  // jobs 100, 101, 102
  ::setenv("PDSERVE_FAKE_STATE", "PENDING", 1);
  const Status pending = actuator.SetBurstWorkers(Pool::kDecode, 4);  // job 103, pending
  ::unsetenv("PDSERVE_FAKE_STATE");
  ASSERT_TRUE(pending.ok());
  actuator.SetDrainOrder(
      Pool::kDecode, {"gpu7:55", "gpu3:12@slurm:999", "gpu1:31@slurm:100", "gpu2:40@slurm:101"});
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 1).ok());
  EXPECT_EQ(slurm.Calls("scancel"),
            (std::vector<std::string>{"scancel 103", "scancel --full --signal=TERM 100",
                                      "scancel --full --signal=TERM 101"}));
}

TEST(SlurmActuatorTest, APendingJobIsCancelledOutright) {
  testing::TempDir dir;
  FakeSlurm slurm(dir);
  ::setenv("PDSERVE_FAKE_STATE", "PENDING", 1);
  SlurmActuator actuator(slurm.options);
  const Status up = actuator.SetBurstWorkers(Pool::kPrefill, 1);
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kPrefill, 0).ok());
  ::unsetenv("PDSERVE_FAKE_STATE");
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(slurm.Calls("scancel"), (std::vector<std::string>{"scancel 100"}));
}

TEST(SlurmActuatorTest, AJobThatEndedOnItsOwnIsReplaced) {
  testing::TempDir dir;
  FakeSlurm slurm(dir);
  SlurmActuator actuator(slurm.options);
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 2).ok());
  slurm.End("100");  // its node failed
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 2).ok());
  EXPECT_EQ(slurm.Calls("sbatch").size(), 3u);
}

TEST(SlurmActuatorTest, JobsAPreviousGatewayLeftAreCountedAndLetGo) {
  testing::TempDir dir;
  FakeSlurm slurm(dir);
  {
    SlurmActuator before(slurm.options);
    ASSERT_TRUE(before.SetBurstWorkers(Pool::kDecode, 2).ok());
  }
  SlurmActuator after(slurm.options);
  ASSERT_TRUE(after.SetBurstWorkers(Pool::kDecode, 1).ok());
  EXPECT_EQ(slurm.Calls("sbatch").size(), 2u);
  EXPECT_EQ(slurm.Calls("scancel"), (std::vector<std::string>{"scancel --full --signal=TERM 101"}));
}

TEST(SlurmActuatorTest, ARefusedSubmissionIsAnErrorSayingWhy) {
  testing::TempDir dir;
  FakeSlurm slurm(dir);
  slurm.options.sbatch = testing::WriteScript(
      dir / "sbatch-refusing",
      "echo 'sbatch: error: Batch job submission failed: Invalid partition name specified' "
      ">&2\nexit 1\n");
  SlurmActuator actuator(slurm.options);
  const Status s = actuator.SetBurstWorkers(Pool::kDecode, 1);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("Invalid partition name specified"), std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace pdserve::planner
