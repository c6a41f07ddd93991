// TMA tensor maps of the JIT's sm_90 kernels (runtime/LAYOUTS.md, "TMA"): the records in
// their launch facts, and the tiled maps a launch encodes from its argument values, as the Python
// launcher does (tilebc_runtime/tensor_maps.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tilebc/bytecode.hpp"

namespace tilebc {

class Json;
struct Arg;

/// A dim or stride of a record: a constant, or the value of a flat kernel parameter.
struct MapValue {
  bool from_param = false;
  std::uint64_t value = 0;  ///< the constant, or the parameter index
};

/// One metadata record (KernelInfo.tensor_maps): dims and box dimension 0 (contiguous) first,
/// strides (of dims 1..) in elements. Interleave is none and the OOB fill zero (checked).
struct TensorMapRecord {
  std::string param;    ///< the kernel parameter that holds the map
  unsigned array = 0;   ///< flat index of the base-pointer parameter
  std::string element;  ///< "f16" or "bf16"
  std::vector<MapValue> dims;
  std::vector<MapValue> strides;
  std::vector<unsigned> box;
  unsigned swizzle = 0;  ///< bytes: 0, 32, 64 or 128
};

/// Parse the `tensor_maps` list of launch facts. Throws Errc::malformed naming `file` and
/// `where` (the entry) for anything the launcher could not encode from.
std::vector<TensorMapRecord> parse_tensor_maps(const Json& list, const std::string& where,
                                               const std::string& file = {});

/// Check the records' parameter indices against `entry`: the array a pointer, dims and strides
/// integers. Throws Errc::malformed naming `file`.
void check_tensor_maps(const std::vector<TensorMapRecord>& maps, const Entry& entry,
                       const std::string& file = {});

/// One map as cuTensorMapEncodeTiled takes it: dims innermost first, byte strides of dims 1..,
/// box in elements, element strides 1.
struct TiledMap {
  std::string param;
  std::string element;
  std::uint64_t address = 0;
  std::vector<std::uint64_t> dims;
  std::vector<std::uint64_t> strides;
  std::vector<std::uint32_t> box;
  unsigned swizzle = 0;

  /// A zero extent: every element a copy asks for lies outside the tensor.
  bool empty() const;
};

/// Bytes of the zeroed per-context buffer maps over empty arrays are encoded over.
constexpr std::size_t kTensorMapZeroScratchBytes = 256;

/// The map to encode for `map`: itself, or for an empty one the same element type, box and
/// swizzle over the zeroed buffer at `scratch`, every extent 1 and every stride 16 bytes
/// (TMA cannot encode a zero extent; copies then read zero or zero-fill: the same as padding).
TiledMap over_zeros(const TiledMap& map, std::uint64_t scratch);

/// The map `record` describes for a launch of `entry` with `args` (already checked against it).
/// Throws Errc::argument_mismatch, naming the entry, the map and the parameter, where TMA
/// cannot encode it (base or stride not a multiple of 16 bytes, a negative or oversized extent).
/// A map over an empty array is returned `empty()`, its base and strides unchecked (unread).
TiledMap resolve_tensor_map(const TensorMapRecord& record, const Entry& entry, const std::vector<Arg>& args);

/// Bytes of one element of a map's element type (0 when unknown).
unsigned tensor_map_element_bytes(const std::string& element);

}  // namespace tilebc
