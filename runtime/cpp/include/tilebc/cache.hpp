// The cubin cache shared with the Python runtime (runtime/CACHE.md): key, layout and lookup.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tilebc {

constexpr const char* kCacheMagic = "tilebc-cubin-cache";
constexpr const char* kCacheSchema = "1";

/// Fields 3 and 5–9 of the key (1, 2 are constants, 4 is the bytecode itself).
struct CacheKeyInputs {
  std::string toolchain;     ///< "tilebc-jit/0.1.0+3f2a9c0d1e2b4a5c" or "tileiras/13.5.37"
  std::string entry;
  std::string arch;          ///< "sm_90"
  std::string ptx_isa;       ///< "8.8", or empty for backends that emit no PTX
  std::string nvjitlink;     ///< "13.5", or empty
  std::string options_json;  ///< canonical JSON, e.g. {"opt_level":3}
};

/// sha256 over the length-prefixed fields (8-byte little-endian length, then the bytes).
std::string cache_key(const std::uint8_t* bytecode, std::size_t size, const CacheKeyInputs& inputs);

/// One toolchain record of <root>/v1/toolchain.json: what the Python runtime compiles with.
struct ToolchainRecord {
  std::string toolchain;
  std::string nvjitlink;
  std::string options_json;  ///< canonicalised here from the record's "options" object
  std::string ptx_isa_default;
  std::vector<std::pair<std::string, std::string>> ptx_isa_by_arch;
  std::string ptx_isa_for(const std::string& arch) const;
};

/// The cache root: $TILEBC_CACHE_DIR, else $XDG_CACHE_HOME/tilebc, else ~/.cache/tilebc.
/// Empty when TILEBC_CACHE_DIR=off (the cache is disabled).
std::string default_cache_root();

/// The records of <root>/v1/toolchain.json (empty when the file does not exist). Throws
/// Errc::malformed naming the file when it exists but cannot be understood.
std::vector<ToolchainRecord> read_toolchain(const std::string& root);

/// A verified cache entry.
struct CachedCubin {
  std::string key;
  std::string cubin_path;
  std::vector<std::uint8_t> cubin;
  unsigned threads_per_cta = 0;        ///< 0: not recorded
  unsigned dynamic_shared_bytes = 0;
};

/// <root>/v1/<key[0:2]>/<key>.cubin + .json, trusted only when the metadata exists, parses, and
/// records the cubin's sha256 and size correctly. Anything else is a miss (std::nullopt).
std::optional<CachedCubin> cache_lookup(const std::string& root, const std::string& key);

}  // namespace tilebc
