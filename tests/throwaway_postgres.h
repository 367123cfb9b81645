// ThrowawayPostgres: a PostgreSQL server of the test binary's own (Debian's postgresql package,
// which scripts/setup --test installs), in a fresh folder on a free loopback port, stopped and
// removed when the binary exits; and a fresh database in it per test. As root (CI) it runs as
// the package's `postgres` user, which is what the server asks. Tests only.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "tests/command_run.h"

namespace pdserve::testing {

class ThrowawayPostgres {
 public:
  // The binary's server, started on first use; nullptr (and `why` says why) when it cannot be.
  static ThrowawayPostgres* Shared(std::string* why) {
    static std::string error;
    static std::unique_ptr<ThrowawayPostgres> server = [] {
      auto s = std::unique_ptr<ThrowawayPostgres>(new ThrowawayPostgres());
      if (!s->error_.empty()) {
        error = s->error_;
        return std::unique_ptr<ThrowawayPostgres>();
      }
      return s;
    }();
    if (!server && why) *why = error;
    return server.get();
  }

  ~ThrowawayPostgres() {
    if (started_) As(pg_ + "/pg_ctl -D " + dir_ + "/data -m immediate stop >/dev/null");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // A new, empty database; its URI (trust authentication, loopback only).
  std::string NewDatabase() {
    static std::atomic<int> next{0};
    const std::string name = "t" + std::to_string(::getpid()) + "_" + std::to_string(next++);
    const CommandRun r = As(pg_ + "/psql -h 127.0.0.1 -p " + std::to_string(port_) +
                            " -U pdserve -d postgres -q -c 'CREATE DATABASE " + name + "'");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return Uri(name);
  }
  std::string Uri(const std::string& database) const {
    return "postgresql://pdserve@127.0.0.1:" + std::to_string(port_) + "/" + database;
  }
  // `sql` run by psql on `database`; its output (unaligned, tuples only).
  CommandRun Psql(const std::string& database, const std::string& sql) const {
    return As(pg_ + "/psql -h 127.0.0.1 -p " + std::to_string(port_) + " -U pdserve -d " +
              database + " -At -v ON_ERROR_STOP=1 -c \"" + sql + "\"");
  }
  int port() const { return port_; }

 private:
  ThrowawayPostgres() {
    const CommandRun bin =
        RunShell("ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1");
    pg_ = bin.out.substr(0, bin.out.find('\n'));
    if (pg_.empty() || !std::filesystem::exists(pg_ + "/initdb")) {
      error_ = "PostgreSQL's server is not installed (scripts/setup --test installs it)";
      return;
    }
    char tmpl[] = "/tmp/pdserve-pg.XXXXXX";
    if (!::mkdtemp(tmpl)) {
      error_ = "cannot make a folder under /tmp";
      return;
    }
    dir_ = tmpl;
    as_root_ = ::geteuid() == 0;
    if (as_root_) RunShell("chown postgres " + dir_);
    port_ = FreePort();
    CommandRun r = As(pg_ + "/initdb -D " + dir_ + "/data -A trust -U pdserve >/dev/null", 120);
    if (r.exit_code != 0) {
      error_ = "initdb failed: " + r.out;
      return;
    }
    r = As(pg_ + "/pg_ctl -D " + dir_ + "/data -l " + dir_ + "/log -w -t 60 start -o '-p " +
               std::to_string(port_) + " -k " + dir_ + " -c listen_addresses=127.0.0.1'",
           90);
    if (r.exit_code != 0) {
      error_ = "pg_ctl start failed: " + r.out;
      return;
    }
    started_ = true;
  }

  // `command` as the server's user.
  CommandRun As(const std::string& command, int timeout_s = 60) const {
    if (!as_root_) return RunShell(command, timeout_s);
    return RunShell("runuser -u postgres -- sh -c " + Quoted(command), timeout_s);
  }
  static std::string Quoted(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  }
  static int FreePort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t n = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    ::close(fd);
    return ntohs(a.sin_port);
  }

  std::string pg_, dir_, error_;
  bool as_root_ = false, started_ = false;
  int port_ = 0;
};

// A fixture with a fresh database on the binary's server, in uri_ (the test fails without one).
class PostgresFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    server_ = ThrowawayPostgres::Shared(&why);
    ASSERT_NE(server_, nullptr) << why;
    uri_ = server_->NewDatabase();
  }
  ThrowawayPostgres* server_ = nullptr;
  std::string uri_;
};

}  // namespace pdserve::testing
