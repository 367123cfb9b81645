// Reading and writing the safetensors format: an 8-byte little-endian header length, a JSON
// header naming each tensor's dtype, shape and byte range, then the raw bytes. Readers map the
// file and hand out views; nothing is copied. A SafetensorsFile is immutable after Open and may
// be read from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mapped_file.h"
#include "common/status.h"
#include "model/dtype.h"

namespace pdserve::model {

// A view of one tensor inside a mapped file (or any other memory that outlives it).
struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;

  int64_t numel() const;
  size_t bytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype); }
  std::string ShapeString() const;  // "[4096, 4096]"
};

class SafetensorsFile {
 public:
  // Validates the header and that every tensor's bytes lie inside the file, so a truncated
  // file is refused here with the name of the first tensor that does not fit.
  static Result<std::shared_ptr<const SafetensorsFile>> Open(const std::string& path);
  // The same checks on a whole file's bytes already in memory (`path` names it in errors): its
  // tensors, as views into `bytes`.
  static Result<std::map<std::string, TensorView>> ParseTensors(const uint8_t* bytes, size_t size,
                                                                const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const TensorView* Find(const std::string& name) const;

 private:
  MappedFile file_;
  std::map<std::string, TensorView> tensors_;
};

// A tensor to write: name, dtype, shape and its bytes (already in that dtype).
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Writes tensors to one safetensors file (data 8-byte aligned), replacing it atomically.
Status WriteSafetensors(const std::string& path, const std::vector<const TensorToWrite*>& tensors);

}  // namespace pdserve::model
