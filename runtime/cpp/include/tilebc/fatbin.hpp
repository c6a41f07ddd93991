// Ahead-of-time kernels: an NVIDIA fatbinary plus tilebc's JSON metadata beside it (FATBIN.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tilebc/bytecode.hpp"
#include "tilebc/tensor_map.hpp"

namespace tilebc {

/// One image inside a fatbinary container.
struct FatbinImage {
  unsigned kind = 0;           ///< 1: PTX, 2: ELF (cubin)
  unsigned arch = 0;           ///< 80 for sm_80
  std::uint64_t offset = 0;    ///< payload offset in the file
  std::uint64_t size = 0;      ///< payload bytes
};

/// The images of a fatbinary (one or more concatenated containers), bounds-checked.
/// Throws Errc::malformed naming `file` and the offset of the fault.
std::vector<FatbinImage> read_fatbin(const std::uint8_t* data, std::size_t size,
                                     const std::string& file = {});

/// "sm_90" -> 90; 0 when the text is not of that form.
unsigned parse_arch(const std::string& arch);

/// Launch facts for one entry on one architecture.
struct LaunchInfo {
  std::string arch;
  unsigned threads_per_cta = 0;
  unsigned dynamic_shared_bytes = 0;
  /// TMA tensor maps (the JIT's sm_90 default) the launch appends after the kernel's own parameters.
  std::vector<TensorMapRecord> tensor_maps;
};

/// The metadata of an AOT fatbin: the entries (with signatures) and the per-arch launch facts.
struct AotMetadata {
  std::string toolchain;
  std::string bytecode_sha256;
  Version bytecode_version;
  std::vector<std::string> archs;
  std::vector<Entry> entries;
  std::vector<std::vector<LaunchInfo>> launch;  ///< parallel to `entries`
  /// The PTX image for forward compatibility ("" when there is none), and the launch facts of
  /// each entry when the driver JIT-compiles it (parallel to `entries`).
  std::string ptx_arch;
  std::vector<LaunchInfo> ptx_launch;
};

/// Parse and check metadata against its fatbin: the digest matches, and every listed arch has
/// a cubin in the fatbin. Throws Errc::malformed naming `metadata_file`.
AotMetadata read_aot_metadata(const std::string& metadata_json, const std::uint8_t* fatbin,
                              std::size_t fatbin_size, const std::string& metadata_file = {});

/// Describe a kernel parameter from its Tile IR spelling ("tile<ptr<f32>>", "tile<i32>").
Param param_from_type(const std::string& type);

}  // namespace tilebc
