// MetricsHttpServer: serves one prometheus-cpp Registry as Prometheus text at GET /metrics, on
// Boost.Beast (one I/O thread; scrapes are small and rare). Workers use it for their /metrics.
// Not prometheus-cpp's civetweb exposer: its small thread stacks overflow under the address
// sanitizer. Start() binds (port 0: chosen by the OS); the destructor stops the thread.
#pragma once

#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace pdserve::worker {

class MetricsHttpServer {
 public:
  static Result<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& bind_address, int port, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsHttpServer();
  uint16_t port() const;

  class Impl;

 private:
  explicit MetricsHttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pdserve::worker
