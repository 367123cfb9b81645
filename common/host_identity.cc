#include "common/host_identity.h"

#include <unistd.h>

#include <fstream>

namespace pdserve {

const std::string& HostIdentity() {
  static const std::string identity = [] {
    std::string id;
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::getline(in, id);
    if (!id.empty()) return id;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return std::string(host);
  }();
  return identity;
}

}  // namespace pdserve
