// SHA-256 (FIPS 180-4), for the cubin cache key and the integrity checks of cache entries.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tilebc {

class Sha256 {
 public:
  Sha256();
  Sha256& update(const void* data, std::size_t size);
  Sha256& update(const std::string& text) { return update(text.data(), text.size()); }
  std::array<std::uint8_t, 32> digest();  ///< finishes; the object must not be updated again
  std::string hexdigest();

 private:
  void block(const std::uint8_t* chunk);
  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t length_ = 0;
};

/// Lower-case hex SHA-256 of a buffer.
std::string sha256_hex(const void* data, std::size_t size);

}  // namespace tilebc
