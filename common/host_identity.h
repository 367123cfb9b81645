// HostIdentity: a string naming this boot of this machine (the kernel's boot_id), so two
// processes can tell whether they share a machine: a prefill worker picks CUDA IPC over NCCL only
// for a decode worker on its own machine and GPU. Computed once; safe from any thread.
#pragma once

#include <string>

namespace pdserve {

const std::string& HostIdentity();

}  // namespace pdserve
