// Probing the acceptance environment: each fact measured, or "unknown (why)".
#include "bench/serve/acceptance_environment.h"

#include <dlfcn.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

namespace pdserve::bench {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string Trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// The standard output of a shell command, or nullopt when it cannot run or fails.
std::optional<std::string> CommandOutput(const std::string& command) {
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  int rc = pclose(pipe);
  if (rc != 0) return std::nullopt;
  return out;
}

std::optional<std::string> FirstLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  line = Trim(line);
  if (line.empty()) return std::nullopt;
  return line;
}

std::vector<fs::path> Children(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The kernel module's version in /proc/driver/nvidia/version ("... Module  550.54.15 ...").
std::optional<std::string> ProcDriverVersion() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string word;
  while (in >> word) {
    if (word == "Module" && in >> word) return word;
  }
  return std::nullopt;
}

void ProbeGpus(EnvironmentInfo& info) {
  const char* why = "unknown (nvidia-smi is not installed or failed)";
  info.gpu_model = info.driver_version = info.cuda_version = why;
  info.gpu_count = -1;
  if (auto q = CommandOutput("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader")) {
    ParseNvidiaSmiQuery(*q, info);
    if (auto banner = CommandOutput("nvidia-smi")) info.cuda_version = ParseCudaVersion(*banner);
  } else if (auto driver = ProcDriverVersion()) {
    info.driver_version = *driver;  // a driver, but no nvidia-smi to list its GPUs
    info.gpu_count = static_cast<int64_t>(Children("/proc/driver/nvidia/gpus").size());
  } else if (!fs::exists("/dev/nvidiactl") && !fs::exists("/proc/driver/nvidia")) {
    // No NVIDIA kernel driver is loaded: this host has no usable NVIDIA GPU.
    info.gpu_count = 0;
    info.gpu_model = "none (no NVIDIA driver loaded: /proc/driver/nvidia is absent)";
    info.driver_version = info.cuda_version = "none (no NVIDIA driver loaded)";
  }
  if (auto topo = CommandOutput("nvidia-smi topo -m"); topo && !Trim(*topo).empty()) {
    info.gpu_topology = Trim(*topo);
  } else {
    info.gpu_topology = "unknown (`nvidia-smi topo -m` is not available here)";
  }
}

void ProbeLinks(EnvironmentInfo& info) {
  const fs::path ib = "/sys/class/infiniband";
  if (!fs::exists(ib)) {
    info.infiniband_note = "no InfiniBand or RoCE device (/sys/class/infiniband is absent)";
  }
  for (const fs::path& dev : Children(ib)) {
    for (const fs::path& port : Children(dev / "ports")) {
      info.infiniband.push_back(fmt::format("{} port {}: {}, {}", dev.filename().string(),
                                            port.filename().string(),
                                            FirstLine(port / "rate").value_or("rate unknown"),
                                            FirstLine(port / "state").value_or("state unknown")));
    }
  }
  if (info.infiniband.empty() && info.infiniband_note.empty()) {
    info.infiniband_note = "no InfiniBand or RoCE port listed under /sys/class/infiniband";
  }
  for (const fs::path& net : Children("/sys/class/net")) {
    std::string name = net.filename().string();
    if (name == "lo") continue;
    auto speed = FirstLine(net / "speed");  // unreadable or -1 for links that do not say
    if (!speed || speed->front() == '-') continue;
    info.network.push_back(fmt::format("{}: {} Mb/s", name, *speed));
  }
}

std::string OrUnknown(const std::string& s, const char* why) {
  return s.empty() ? fmt::format("unknown ({})", why) : s;
}

}  // namespace

void ParseNvidiaSmiQuery(std::string_view csv, EnvironmentInfo& info) {
  std::istringstream lines{std::string(csv)};
  std::string line;
  info.gpu_count = 0;
  while (std::getline(lines, line)) {
    line = Trim(line);
    if (line.empty()) continue;
    size_t comma = line.rfind(',');
    std::string name = Trim(line.substr(0, comma));
    std::string driver = comma == std::string::npos ? "" : Trim(line.substr(comma + 1));
    if (info.gpu_count == 0) {
      info.gpu_model = OrUnknown(name, "nvidia-smi gave no name");
      info.driver_version = OrUnknown(driver, "nvidia-smi gave no driver version");
    } else if (name != info.gpu_model) {
      info.gpu_model += " / " + name;  // a mixed node: say so
    }
    ++info.gpu_count;
  }
  if (info.gpu_count == 0) info.gpu_model = info.driver_version = "none (nvidia-smi lists no GPU)";
}

std::string ParseCudaVersion(std::string_view banner) {
  constexpr std::string_view kKey = "CUDA Version:";
  size_t at = banner.find(kKey);
  if (at == std::string_view::npos) return "unknown (nvidia-smi names no CUDA version)";
  std::string_view rest = banner.substr(at + kKey.size());
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  size_t end = rest.find_first_not_of("0123456789.");
  return OrUnknown(std::string(rest.substr(0, end)), "nvidia-smi names no CUDA version");
}

std::string NcclVersionName(int code) {
  if (code <= 0) return "unknown (ncclGetVersion gave no version)";
  if (code < 10000) {  // before NCCL 2.9: major*1000 + minor*100 + patch
    return fmt::format("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100);
  }
  return fmt::format("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100);
}

std::string LoadedNcclVersion(const char* soname, std::string* library) {
  if (library != nullptr) *library = "none";
  void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return fmt::format("not loaded ({})", err ? err : soname);
  }
  using GetVersion = int (*)(int*);
  auto get = reinterpret_cast<GetVersion>(dlsym(handle, "ncclGetVersion"));
  std::string version;
  if (get == nullptr) {
    version = fmt::format("unknown ({} has no ncclGetVersion)", soname);
  } else {
    int code = 0;
    version = get(&code) == 0 ? NcclVersionName(code) : "unknown (ncclGetVersion failed)";
    Dl_info where{};
    if (library != nullptr && dladdr(reinterpret_cast<void*>(get), &where) != 0 &&
        where.dli_fname != nullptr) {
      *library = where.dli_fname;
    }
  }
  dlclose(handle);
  return version;
}

EnvironmentInfo ProbeEnvironment(const std::string& provider, const std::string& region,
                                 const std::string& pdserve_version) {
  EnvironmentInfo info;
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  info.date = date;
  info.provider = OrUnknown(provider, "no --provider given");
  info.region = OrUnknown(region, "no --region given");
  char host[256] = {};
  info.hostname = gethostname(host, sizeof host - 1) == 0 ? OrUnknown(host, "no host name")
                                                          : "unknown (gethostname failed)";
  info.node_id = FirstLine("/etc/machine-id").value_or("unknown (no /etc/machine-id)");
  utsname u{};
  info.os = uname(&u) == 0 ? fmt::format("{} {} {}", u.sysname, u.release, u.machine)
                           : "unknown (uname failed)";
  ProbeGpus(info);
  info.nccl_version = LoadedNcclVersion("libnccl.so.2", &info.nccl_library);
  ProbeLinks(info);
  info.pdserve_version = OrUnknown(pdserve_version, "no version compiled in");
  return info;
}

json EnvironmentJson(const EnvironmentInfo& env) {
  return {{"date", env.date},
          {"provider", env.provider},
          {"region", env.region},
          {"hostname", env.hostname},
          {"node_id", env.node_id},
          {"os", env.os},
          {"gpu_model", env.gpu_model},
          {"gpu_count", env.gpu_count >= 0 ? json(env.gpu_count) : json(nullptr)},
          {"driver_version", env.driver_version},
          {"cuda_version", env.cuda_version},
          {"nccl_version", env.nccl_version},
          {"nccl_library", env.nccl_library},
          {"gpu_topology", env.gpu_topology},
          {"infiniband", env.infiniband},
          {"infiniband_note", env.infiniband_note},
          {"network_links", env.network},
          {"pdserve_version", env.pdserve_version}};
}

}  // namespace pdserve::bench
