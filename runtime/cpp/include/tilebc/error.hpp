// tilebc C++ loader: the one exception type, with a std::error_code and a location.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

namespace tilebc {

/// What went wrong, as a std::error_code in tilebc::error_category().
enum class Errc {
  malformed = 1,        ///< the bytes are not valid Tile IR bytecode (or fatbin / metadata)
  unsupported_version,  ///< a bytecode version outside the supported range
  io,                   ///< a file could not be read or written
  not_found,            ///< no entry / kernel of that name
  argument_mismatch,    ///< launch arguments do not match the entry's signature
  driver_unavailable,   ///< libcuda could not be opened, or there is no device
  driver_error,         ///< a CUDA driver call failed
  compile_unavailable,  ///< a cubin is needed, none is cached, and the Python runtime is missing
  compile_failed,       ///< the Python runtime ran but did not produce a cubin
  no_code_for_device,   ///< a fatbin has no code the current device can run
};

const std::error_category& error_category() noexcept;
std::error_code make_error_code(Errc code) noexcept;

/// Every error the loader raises. what() reads "FILE: offset 0x1a3: message" (or "FILE: message").
class Error : public std::runtime_error {
 public:
  Error(Errc code, std::string message, std::string file = {},
        std::optional<std::uint64_t> offset = std::nullopt);

  std::error_code code() const noexcept { return make_error_code(code_); }
  Errc errc() const noexcept { return code_; }
  /// The message without the location prefix (lower-case, says what was expected).
  const std::string& message() const noexcept { return message_; }
  const std::string& file() const noexcept { return file_; }
  /// Byte offset in `file()` for malformed input.
  std::optional<std::uint64_t> offset() const noexcept { return offset_; }

 private:
  Errc code_;
  std::string message_;
  std::string file_;
  std::optional<std::uint64_t> offset_;
};

}  // namespace tilebc

namespace std {
template <>
struct is_error_code_enum<tilebc::Errc> : true_type {};
}  // namespace std
