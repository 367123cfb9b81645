// RunCommand, with /bin/sh scripts: what a program prints on stdout and stderr comes back
// apart, with its exit status; extra environment reaches it; one that runs too long is killed;
// one that leaves a background child holding its output still returns when it exits; a program
// that does not exist is a clear error; the program inherits no descriptor of the caller's but
// stdin, stdout and stderr.
#include "planner/command_runner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/planner/fake_programs.h"

namespace pdserve::planner {
namespace {

using namespace std::chrono_literals;

TEST(CommandRunnerTest, CollectsStdoutAndStderrApartWithTheExitStatus) {
  auto ran = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; echo more; exit 3"});
  ASSERT_TRUE(ran.ok()) << ran.status().ToString();
  EXPECT_EQ(ran->out, "out\nmore\n");
  EXPECT_EQ(ran->err, "err\n");
  EXPECT_EQ(ran->exit_status, 3);
  EXPECT_EQ(DescribeFailure("scale.sh", *ran), "'scale.sh' exited with status 3: err");
}

// A socket or file the caller opened without close-on-exec (Asio's sockets are) stays out of
// the program and of what it leaves running.
TEST(CommandRunnerTest, TheProgramInheritsNoDescriptorOfTheCallers) {
  const int fd = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC, as a leaked socket would be
  ASSERT_GE(fd, 3);
  const std::string check = "test -e /proc/$$/fd/" + std::to_string(fd) +
                            " && echo inherited || echo closed; test -e /proc/$$/fd/1 && echo out";
  auto ran = RunCommand({"/bin/sh", "-c", check});
  ::close(fd);
  ASSERT_TRUE(ran.ok()) << ran.status().ToString();
  EXPECT_EQ(ran->out, "closed\nout\n");
}

TEST(CommandRunnerTest, ExtraEnvironmentOverridesAndAdds) {
  ::setenv("PDSERVE_RUNNER_TEST", "outer", 1);
  auto ran = RunCommand({"/bin/sh", "-c", "echo $PDSERVE_RUNNER_TEST $PDSERVE_EXTRA"}, 10s,
                        {{"PDSERVE_RUNNER_TEST", "inner"}, {"PDSERVE_EXTRA", "x"}});
  ASSERT_TRUE(ran.ok());
  EXPECT_EQ(ran->out, "inner x\n");
}

TEST(CommandRunnerTest, AProgramPastItsTimeoutIsKilled) {
  const auto start = std::chrono::steady_clock::now();
  auto ran = RunCommand({"/bin/sh", "-c", "sleep 30"}, 300ms);
  EXPECT_EQ(ran.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(CommandRunnerTest, ABackgroundChildHoldingTheOutputDoesNotHoldTheCaller) {
  testing::TempDir dir;
  const std::string pid_file = dir / "child.pid";
  const auto start = std::chrono::steady_clock::now();
  auto ran =
      RunCommand({"/bin/sh", "-c", "sleep 30 & echo $! > " + pid_file + "; echo started"}, 20s);
  ASSERT_TRUE(ran.ok()) << ran.status().ToString();
  EXPECT_EQ(ran->out, "started\n");
  EXPECT_EQ(ran->exit_status, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  const int child = std::atoi(testing::ReadText(pid_file).c_str());
  if (child > 0) ::kill(child, SIGKILL);
}

TEST(CommandRunnerTest, AMissingProgramIsAClearError) {
  auto ran = RunCommand({"/nonexistent/pdserve-scale"});
  EXPECT_EQ(ran.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(ran.status().message().find("could not run '/nonexistent/pdserve-scale'"),
            std::string::npos)
      << ran.status().ToString();
}

}  // namespace
}  // namespace pdserve::planner
