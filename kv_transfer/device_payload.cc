// The parts of device_payload.h that do not need CUDA: factories that dispatch to the CUDA-IPC
// and NCCL implementations when they are built, and version probes for reports.
#include "kv_transfer/device_payload.h"

#include <optional>

#include "kv_transfer/gpu_payloads.h"

namespace pdserve::kv_transfer {

Result<PayloadPath> ChoosePayloadPath(std::string_view name, std::string_view device) {
  const bool gpu = device.rfind("cuda", 0) == 0;  // cpu and sim: host memory
  std::optional<PayloadPath> path;
  if (name == "auto") path = gpu ? PayloadPath::kNccl : PayloadPath::kTcp;
  for (PayloadPath p : {PayloadPath::kTcp, PayloadPath::kNccl, PayloadPath::kCudaIpc}) {
    if (name == PayloadPathName(p)) path = p;
  }
  if (!path) {
    return InvalidArgument("--kv-path '" + std::string(name) +
                           "' is not one of auto, tcp, nccl, ipc");
  }
  if (gpu && path == PayloadPath::kTcp) {
    return InvalidArgument("--kv-path tcp moves host memory, but the KV pages of --device " +
                           std::string(device) + " are in GPU memory: use nccl or ipc");
  }
  if (!gpu && path != PayloadPath::kTcp) {
    return InvalidArgument("--kv-path " + std::string(name) +
                           " moves GPU memory, but the KV pages of --device cpu are in host "
                           "memory: use tcp");
  }
  return *path;
}

PayloadPath GpuPathTo(const GpuIdentity& self, const GpuIdentity& peer) {
  const bool same_gpu =
      !self.uuid.empty() && !peer.uuid.empty()
          ? self.uuid == peer.uuid
          : !peer.host_id.empty() && peer.host_id == self.host_id && peer.device == self.device;
  return same_gpu ? PayloadPath::kCudaIpc : PayloadPath::kNccl;
}

Result<std::unique_ptr<DevicePayloadSender>> MakeDevicePayloadSender(PayloadPath path,
                                                                     const KvLayout& layout,
                                                                     int device) {
  switch (path) {
    case PayloadPath::kCudaIpc:
      return MakeCudaIpcSender(layout, device);
    case PayloadPath::kNccl:
      return MakeNcclSender(layout, device);
    case PayloadPath::kTcp:
      break;
  }
  return InvalidArgument("KV: the TCP path has no device payload");
}

Result<std::unique_ptr<DevicePayloadReceiver>> MakeDevicePayloadReceiver(
    PayloadPath path, const KvLayout& layout, int device, std::vector<void*> layer_bases,
    int num_pages) {
  switch (path) {
    case PayloadPath::kCudaIpc:
      return MakeCudaIpcReceiver(layout, device, std::move(layer_bases), num_pages);
    case PayloadPath::kNccl:
      return MakeNcclReceiver(layout, device);
    case PayloadPath::kTcp:
      break;
  }
  return InvalidArgument("KV: the TCP path has no device payload");
}

}  // namespace pdserve::kv_transfer
