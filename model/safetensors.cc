#include "model/safetensors.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/json_text.h"

namespace pdserve::model {

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::ShapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  PDSERVE_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  auto out = std::make_shared<SafetensorsFile>();
  PDSERVE_ASSIGN_OR_RETURN(out->tensors_, ParseTensors(file.data(), file.size(), path));
  out->file_ = std::move(file);
  return std::shared_ptr<const SafetensorsFile>(std::move(out));
}

Result<std::map<std::string, TensorView>> SafetensorsFile::ParseTensors(const uint8_t* bytes,
                                                                        size_t size,
                                                                        const std::string& path) {
  if (size < 8) return DataLoss(path + ": too short for a safetensors header");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > size - 8 || header_len > (100u << 20)) {
    return DataLoss(path + ": header length " + std::to_string(header_len) +
                    " exceeds the file (truncated or not safetensors)");
  }
  const char* header_begin = reinterpret_cast<const char*>(bytes + 8);
  auto header = nlohmann::json::parse(header_begin, header_begin + header_len, nullptr, false);
  if (header.is_discarded() || !header.is_object()) {
    return DataLoss(path + ": header is not a JSON object");
  }
  const uint8_t* data_begin = bytes + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;

  std::map<std::string, TensorView> tensors;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = path + ": tensor '" + name + "'";
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets")) {
      return InvalidArgument(where + ": header entry needs dtype, shape and data_offsets");
    }
    const auto& dtype_j = info["dtype"];
    auto dtype = dtype_j.is_string() ? ParseDType(dtype_j.get<std::string>()) : std::nullopt;
    if (!dtype) {
      return Unimplemented(where + ": dtype " + DescribeJson(dtype_j) +
                           " is not supported (F32, BF16, F16)");
    }
    TensorView view;
    view.dtype = *dtype;
    const auto& shape = info["shape"];
    if (!shape.is_array()) return InvalidArgument(where + ": shape is not a list");
    int64_t numel = 1;  // bounded as it grows, so that numel() and bytes() cannot overflow
    for (const auto& d : shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t{1} << 40)) {
        return InvalidArgument(where + ": bad dimension " + DescribeJson(d));
      }
      view.shape.push_back(d.get<int64_t>());
      if (__builtin_mul_overflow(numel, d.get<int64_t>(), &numel) || numel > (int64_t{1} << 48)) {
        return InvalidArgument(where + ": shape " + view.ShapeString() +
                               " holds more elements than any file can");
      }
    }
    const auto& offsets = info["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      return InvalidArgument(where + ": data_offsets must be two non-negative integers");
    }
    uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end - begin != view.bytes()) {
      return InvalidArgument(where + ": data_offsets [" + std::to_string(begin) + ", " +
                             std::to_string(end) + ") do not match shape " + view.ShapeString() +
                             " of " + std::string(DTypeName(view.dtype)));
    }
    if (end > data_size) {
      return DataLoss(where + ": bytes [" + std::to_string(begin) + ", " + std::to_string(end) +
                      ") lie past the end of the file's " + std::to_string(data_size) +
                      " data bytes (truncated file)");
    }
    view.data = data_begin + begin;
    tensors.emplace(name, std::move(view));
  }
  return tensors;
}

const TensorView* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Status WriteSafetensors(const std::string& path, const std::vector<const TensorToWrite*>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const TensorToWrite* t : tensors) {
    std::string dtype = t->dtype == DType::kF32 ? "F32" : t->dtype == DType::kBF16 ? "BF16" : "F16";
    header[t->name] = {{"dtype", dtype},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + t->bytes.size()}}};
    offset += t->bytes.size();
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Unavailable(tmp + ": cannot open for writing");
    uint64_t len = text.size();
    char len_bytes[8];
    for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<char>((len >> (8 * i)) & 0xff);
    out.write(len_bytes, 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const TensorToWrite* t : tensors) {
      out.write(reinterpret_cast<const char*>(t->bytes.data()),
                static_cast<std::streamsize>(t->bytes.size()));
    }
    if (!out.flush()) return Unavailable(tmp + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Unavailable(path + ": rename failed: " + ec.message());
  return Status::Ok();
}

}  // namespace pdserve::model
