#include "planner/local_processes.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

namespace pdserve::planner {

std::string DescribeExit(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    return "killed by signal " + std::to_string(WTERMSIG(wait_status)) + " (" +
           ::strsignal(WTERMSIG(wait_status)) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
}

LocalProcesses::LocalProcesses(LocalProcessesOptions options) : options_(std::move(options)) {}

LocalProcesses::~LocalProcesses() { StopAll(); }

Status LocalProcesses::Spawn(Child& child, Clock::time_point now) {
  std::vector<char*> argv;
  for (auto& a : child.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  rlimit files{};
  const int max_fd = ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
                         ? static_cast<int>(std::min<rlim_t>(files.rlim_cur, 1 << 20))
                         : 1 << 16;
  const pid_t pid = ::fork();
  if (pid < 0) return Unavailable(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec. The child keeps stdin, stdout and stderr
    // only: a worker holding the gateway's client sockets would keep a connection the gateway
    // closed open to its client, who then sends a request into it that nobody reads.
    if (::close_range(3, ~0U, 0) != 0) {
      for (int fd = 3; fd < max_fd; ++fd) ::close(fd);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execv(options_.executable.c_str(), argv.data());
    static const char kFailed[] = "pdserve: exec of a child process failed\n";
    [[maybe_unused]] auto n = ::write(2, kFailed, sizeof kFailed - 1);
    ::_exit(127);
  }
  child.pid = pid;
  child.started = now;
  return Status::Ok();
}

Result<pid_t> LocalProcesses::Start(const std::string& name, std::vector<std::string> argv,
                                    bool supervised) {
  if (argv.empty()) return InvalidArgument("a child process needs argv[0]");
  if (stopped_) return FailedPrecondition("the processes were stopped");
  Child child;
  child.name = name;
  child.argv = std::move(argv);
  child.supervised = supervised;
  child.backoff = options_.first_backoff;
  PDSERVE_RETURN_IF_ERROR(Spawn(child, Clock::now()));
  children_.push_back(std::move(child));
  return children_.back().pid;
}

std::vector<LocalProcesses::Exit> LocalProcesses::Poll(Clock::time_point now,
                                                       std::vector<std::string>* restarted) {
  std::vector<Exit> exits;
  for (Child& c : children_) {
    if (c.pid == 0) continue;
    int status = 0;
    const pid_t gone = ::waitpid(c.pid, &status, WNOHANG);
    if (gone != c.pid) continue;
    Exit e{c.name, c.pid, status, c.supervised && !stopped_, {}};
    c.pid = 0;
    if (e.will_restart) {
      // A child that ran a while was healthy, and one that exited 0 was asked to (it drained):
      // neither exit is part of a crash loop.
      const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (clean || now - c.started >= options_.healthy_after) c.backoff = options_.first_backoff;
      e.backoff = c.backoff;
      c.restart_at = now + c.backoff;
      c.backoff = std::min(c.backoff * 2, options_.max_backoff);
    }
    exits.push_back(std::move(e));
  }
  for (Child& c : children_) {
    if (c.pid != 0 || !c.supervised || stopped_ || now < c.restart_at) continue;
    if (c.restart_at == Clock::time_point{}) continue;  // not waiting for a restart
    if (!Spawn(c, now).ok()) {
      c.restart_at = now + c.backoff;  // fork failed: try again later
      continue;
    }
    c.restart_at = {};
    ++restarts_;
    if (restarted) restarted->push_back(c.name);
  }
  return exits;
}

bool LocalProcesses::Stop(const std::string& name) {
  for (Child& c : children_) {
    if (c.name != name) continue;
    c.supervised = false;
    c.restart_at = {};
    if (c.pid <= 0) return false;
    ::kill(c.pid, SIGTERM);
    return true;
  }
  return false;
}

void LocalProcesses::StopAll(std::chrono::milliseconds grace) {
  stopped_ = true;
  for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
    if (it->pid > 0) ::kill(it->pid, SIGTERM);
  }
  const auto deadline = Clock::now() + grace;
  for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
    while (it->pid > 0) {
      if (::waitpid(it->pid, nullptr, WNOHANG) == it->pid) {
        it->pid = 0;
      } else if (Clock::now() >= deadline) {
        ::kill(it->pid, SIGKILL);
        ::waitpid(it->pid, nullptr, 0);
        it->pid = 0;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
}

pid_t LocalProcesses::PidOf(const std::string& name) const {
  for (const Child& c : children_) {
    if (c.name == name) return c.pid;
  }
  return 0;
}

}  // namespace pdserve::planner
