#include "common/block_key.h"

#include <openssl/sha.h>

namespace pdserve {
namespace {

void PutLittleEndian(unsigned char* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

}  // namespace

BlockKey ChainBlockKey(BlockKey parent, uint64_t salt, std::span<const int32_t> page_tokens) {
  std::vector<unsigned char> bytes(16 + 4 * page_tokens.size());
  PutLittleEndian(bytes.data(), parent, 8);
  PutLittleEndian(bytes.data() + 8, salt, 8);
  for (size_t i = 0; i < page_tokens.size(); ++i) {
    PutLittleEndian(bytes.data() + 16 + 4 * i, static_cast<uint32_t>(page_tokens[i]), 4);
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(bytes.data(), bytes.size(), digest);
  BlockKey key = 0;
  for (int i = 7; i >= 0; --i) key = (key << 8) | digest[i];
  return key == 0 ? 1 : key;
}

std::vector<BlockKey> PromptBlockKeys(uint64_t salt, std::span<const int32_t> tokens,
                                      int page_size) {
  std::vector<BlockKey> keys;
  ExtendBlockKeys(keys, salt, tokens, page_size);
  return keys;
}

void ExtendBlockKeys(std::vector<BlockKey>& keys, uint64_t salt, std::span<const int32_t> tokens,
                     int page_size) {
  if (page_size <= 0) return;
  const size_t full = tokens.size() / static_cast<size_t>(page_size);
  keys.reserve(full);
  for (size_t page = keys.size(); page < full; ++page) {
    BlockKey parent = page == 0 ? 0 : keys[page - 1];
    keys.push_back(ChainBlockKey(parent, salt, tokens.subspan(page * page_size, page_size)));
  }
}

}  // namespace pdserve
