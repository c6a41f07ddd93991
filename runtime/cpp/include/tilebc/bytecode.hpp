// tilebc C++ loader: a hardened reader for the Tile IR bytecode container.
//
// It reads what a host needs to launch kernels: the header (version, preview tag), the section
// framing, the string, type and constant tables, the debug-section framing, the producer and
// the function table (names, signatures, hints, argument attributes). Function bodies are framed
// (their byte ranges are known and bounds-checked) but not decoded: tileiras / the Python runtime
// check them when they compile. Every length is checked against the bytes that remain, so no
// input makes it read out of bounds, loop unboundedly or allocate more than the input's size.
//
// Like the Python reader's default (format_spec.md §16), it accepts the deviations NVIDIA's
// reader accepts (padding bytes other than 0xCB, repeated sections, table offsets out of order,
// bytes left over in an entry, bool bytes other than 0/1, function flag bits before 13.4, ...),
// reads them as tileirdisasm does and lists each as a DecodeWarning; ReadOptions::strict refuses
// them with the error the warning names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tilebc/error.hpp"

namespace tilebc {

struct Version {
  int major = 0;
  int minor = 0;
  std::string str() const { return std::to_string(major) + "." + std::to_string(minor); }
};

/// How a kernel parameter is passed: a device pointer, an integer or a float scalar.
enum class ParamKind { pointer, integer, floating, unsupported };

const char* to_string(ParamKind kind) noexcept;

/// One entry parameter, as the kernel receives it.
struct Param {
  std::string type;     ///< Tile IR spelling, e.g. "tile<ptr<f32>>", "tile<i32>"
  ParamKind kind = ParamKind::unsupported;
  std::string element;  ///< element type name ("f32"); for pointers the pointee
  unsigned bits = 0;    ///< element bit width (pointers: 64)
  unsigned size = 0;    ///< bytes in the kernel parameter buffer (0: cannot be passed)
};

/// One kernel entry of a module.
struct Entry {
  std::string name;
  std::string signature;            ///< "(tile<ptr<f32>>, tile<i32>) -> ()"
  std::vector<Param> params;
  std::vector<std::string> results;
  std::uint64_t offset = 0;         ///< where its record starts in the file
  std::uint64_t body_begin = 0;     ///< its body's byte range (framed, not decoded)
  std::uint64_t body_end = 0;
};

/// A deviation the reader accepted (format_spec.md §16). `message` is the error a strict read
/// raises; `offset` is the absolute byte offset, both exactly as the Python reader's DecodeWarning.
struct DecodeWarning {
  std::string message;
  std::uint64_t offset = 0;
  std::string action;  ///< how the bytes were read instead (tileirdisasm's reading)
};

/// How to read: by default as NVIDIA's reader does, with warnings; `strict` refuses deviations.
struct ReadOptions {
  bool strict = false;
  /// Bytes by which the entries read from one table whose offsets are out of order may overlap
  /// (the Python reader's DecodeLimits.max_overlap_bytes).
  std::uint64_t max_overlap_bytes = std::uint64_t(1) << 26;
  /// Elements one tile type may have (the product of its shape; the Python reader's
  /// DecodeLimits.max_tile_elements). A file with a larger tile type is refused.
  std::uint64_t max_tile_elements = std::uint64_t(1) << 24;
};

/// What the reader found in a bytecode file.
struct BytecodeInfo {
  Version version;
  bool preview = false;
  std::optional<std::string> producer;
  std::vector<Entry> entries;
  /// Byte ranges whose contents this reader frames but does not decode (function bodies, the
  /// global section, constant payloads, debug attributes, and types the function table does not
  /// reach that do not decode or decode only with warnings: Python reads those only if an op uses
  /// them).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> undecoded;
  /// Deviations read leniently, in the order met, each (message, offset) once. Empty when strict.
  std::vector<DecodeWarning> warnings;

  const Entry* find(const std::string& name) const;
};

/// Read a bytecode file held in memory. `file` names it in errors. Throws tilebc::Error
/// (Errc::malformed or Errc::unsupported_version) with the byte offset of the fault.
BytecodeInfo read_bytecode(const std::uint8_t* data, std::size_t size, const std::string& file = {},
                           const ReadOptions& options = {});

/// Read a whole file into memory; throws Errc::io naming the file.
std::vector<std::uint8_t> read_file(const std::string& path);

}  // namespace tilebc
