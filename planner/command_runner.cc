#include "planner/command_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

extern char** environ;

namespace pdserve::planner {
namespace {

constexpr size_t kMaxOutput = 64 << 10;

// Closes what it holds when it goes out of scope.
struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
};

}  // namespace

Result<CommandOutput> RunCommand(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout,
                                 const std::map<std::string, std::string>& extra_env) {
  if (argv.empty()) return InvalidArgument("no program to run");
  Pipe out, err;
  if (::pipe2(out.fd, O_CLOEXEC) != 0 || ::pipe2(err.fd, O_CLOEXEC) != 0) {
    return Unavailable(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err.fd[1], 2);
  // Nothing else of ours: a child that outlives the command (a worker it starts) holding the
  // gateway's client sockets would keep a connection the gateway closed open to its client, who
  // then sends a request into it that nobody reads.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);  // whatever the caller blocks
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> env_strings;
  std::map<std::string, std::string> overridden = extra_env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    if (!overridden.count(key)) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : extra_env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (spawned != 0) {
    return Unavailable("could not run '" + argv[0] + "': " + std::strerror(spawned));
  }
  ::close(out.fd[1]);
  ::close(err.fd[1]);
  out.fd[1] = err.fd[1] = -1;

  CommandOutput result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::array<pollfd, 2> fds{pollfd{out.fd[0], POLLIN, 0}, pollfd{err.fd[0], POLLIN, 0}};
  std::array<std::string*, 2> sinks{&result.out, &result.err};
  for (const pollfd& f : fds) ::fcntl(f.fd, F_SETFL, O_NONBLOCK);
  auto drain = [&](size_t i) {
    char buffer[4096];
    for (;;) {
      const ssize_t got = ::read(fds[i].fd, buffer, sizeof buffer);
      if (got > 0) {
        const size_t room = kMaxOutput - std::min(kMaxOutput, sinks[i]->size());
        sinks[i]->append(buffer, std::min(room, static_cast<size_t>(got)));
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got == 0) fds[i].fd = -1;  // closed; the descriptor closes with `out` or `err`
      return;                        // or EAGAIN: nothing more now
    }
  };
  // Until the program exits: a program that leaves a background child holding its stdout (a
  // script that starts a worker with `&`) ends when it exits, not when the pipe closes.
  int status = 0;
  bool exited = false, timed_out = false;
  while (!exited) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    const int wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 50));
    if (fds[0].fd >= 0 || fds[1].fd >= 0) {
      if (::poll(fds.data(), fds.size(), wait_ms) > 0) {
        for (size_t i = 0; i < fds.size(); ++i) {
          if (fds[i].fd >= 0 && fds[i].revents != 0) drain(i);
        }
      }
    } else {
      ::usleep(static_cast<useconds_t>(wait_ms) * 1000);
    }
    exited = ::waitpid(pid, &status, WNOHANG) == pid;
  }
  if (timed_out) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return DeadlineExceeded("'" + argv[0] + "' ran past " + std::to_string(timeout.count()) +
                            " ms and was killed");
  }
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].fd >= 0) drain(i);
  }
  result.exit_status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return result;
}

std::string DescribeFailure(const std::string& program, const CommandOutput& output) {
  std::string last = output.err.empty() ? output.out : output.err;
  while (!last.empty() && (last.back() == '\n' || last.back() == ' ')) last.pop_back();
  if (const size_t nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
  return "'" + program + "' exited with status " + std::to_string(output.exit_status) +
         (last.empty() ? std::string() : ": " + last);
}

}  // namespace pdserve::planner
