// HostIdentity names this boot of this machine: not empty, the same on every call, and the
// kernel's boot_id where /proc has it.
#include "common/host_identity.h"

#include <gtest/gtest.h>

#include <fstream>

namespace pdserve {
namespace {

TEST(HostIdentityTest, IsTheBootIdAndStable) {
  const std::string& id = HostIdentity();
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(&HostIdentity(), &id);
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (std::getline(in, boot_id)) {
    EXPECT_EQ(id, boot_id);
  }
}

}  // namespace
}  // namespace pdserve
