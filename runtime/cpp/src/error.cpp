#include "tilebc/error.hpp"

#include <cstdio>

namespace tilebc {
namespace {

class Category : public std::error_category {
 public:
  const char* name() const noexcept override { return "tilebc"; }
  std::string message(int code) const override {
    switch (static_cast<Errc>(code)) {
      case Errc::malformed: return "malformed input";
      case Errc::unsupported_version: return "unsupported bytecode version";
      case Errc::io: return "input/output error";
      case Errc::not_found: return "no such entry";
      case Errc::argument_mismatch: return "launch arguments do not match the signature";
      case Errc::driver_unavailable: return "CUDA driver unavailable";
      case Errc::driver_error: return "CUDA driver call failed";
      case Errc::compile_unavailable: return "no cubin cached and the Python runtime is unavailable";
      case Errc::compile_failed: return "the Python runtime failed to compile";
      case Errc::no_code_for_device: return "no code for this device";
    }
    return "unknown tilebc error";
  }
};

std::string format_what(const std::string& message, const std::string& file,
                        const std::optional<std::uint64_t>& offset) {
  if (offset) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "0x%llx", static_cast<unsigned long long>(*offset));
    return (file.empty() ? std::string("<bytes>") : file) + ": offset " + buffer + ": " + message;
  }
  return file.empty() ? message : file + ": " + message;
}

}  // namespace

const std::error_category& error_category() noexcept {
  static const Category category;
  return category;
}

std::error_code make_error_code(Errc code) noexcept {
  return {static_cast<int>(code), error_category()};
}

Error::Error(Errc code, std::string message, std::string file, std::optional<std::uint64_t> offset)
    : std::runtime_error(format_what(message, file, offset)),
      code_(code),
      message_(std::move(message)),
      file_(std::move(file)),
      offset_(offset) {}

}  // namespace tilebc
