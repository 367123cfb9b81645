// The facts of an acceptance run's environment, each measured on this host or marked unknown
// with the reason, never a constant: date, provider and region (the buyer's labels), host, node
// id, OS, GPUs (model, count, driver, CUDA: nvidia-smi, else /proc/driver/nvidia), the NCCL of
// the library the dynamic loader finds (dlopen("libnccl.so.2") and its ncclGetVersion, or "not
// loaded"), the interconnect (`nvidia-smi topo -m`, InfiniBand ports from /sys/class/infiniband,
// network links from /sys/class/net) and the pdserve version. ProbeEnvironment runs external
// commands and reads files: any thread, slow (up to seconds).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace pdserve::bench {

struct EnvironmentInfo {
  std::string date;  // UTC, ISO 8601
  std::string provider;
  std::string region;
  std::string hostname;
  std::string node_id;  // /etc/machine-id
  std::string os;       // uname: system release machine
  std::string gpu_model;
  int64_t gpu_count = -1;  // -1: unknown
  std::string driver_version;
  std::string cuda_version;  // the driver's CUDA version (nvidia-smi)
  std::string nccl_version;  // ncclGetVersion of the dlopen()ed library, or "not loaded (...)"
  std::string nccl_library;  // the path the loader resolved, or "none"
  std::string gpu_topology;  // `nvidia-smi topo -m`, or "unknown (...)"
  std::vector<std::string> infiniband;  // "mlx5_0 port 1: 200 Gb/sec (4X HDR), 4: ACTIVE"
  std::string infiniband_note;          // why the list is empty
  std::vector<std::string> network;     // "eth0: 25000 Mb/s" for links that report a speed
  std::string pdserve_version;
};

EnvironmentInfo ProbeEnvironment(const std::string& provider, const std::string& region,
                                 const std::string& pdserve_version);

// The environment as the acceptance JSON's "environment" object.
nlohmann::json EnvironmentJson(const EnvironmentInfo& env);

// Parsers of the probed commands' output, exposed for tests.
// `nvidia-smi --query-gpu=name,driver_version --format=csv,noheader` -> model, count, driver.
void ParseNvidiaSmiQuery(std::string_view csv, EnvironmentInfo& info);
// "CUDA Version: 12.4" in nvidia-smi's banner, else "unknown (...)".
std::string ParseCudaVersion(std::string_view banner);
// "2.21.5" from ncclGetVersion's 22105 (and 2.x before 2.9's 2xyz encoding).
std::string NcclVersionName(int code);
// The version of the NCCL library dlopen() finds under `soname`, or "not loaded (why)"; the
// resolved path goes to *library when not null.
std::string LoadedNcclVersion(const char* soname, std::string* library);

}  // namespace pdserve::bench
