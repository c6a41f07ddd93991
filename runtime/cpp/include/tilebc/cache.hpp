// The cubin cache shared with the Python runtime (runtime/CACHE.md): key, layout and lookup.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tilebc/tensor_map.hpp"

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

/// One backend's record in <root>/v1/toolchain.json, which the Python runtime writes:
/// {"schema": 1, "backends": {"<backend>": {"identity": "...", "ptx_isa": {"sm_90": "7.8", ...},
///  "nvjitlink": "13.5", "options": {}}}} (runtime/CACHE.md).
struct ToolchainRecord {
  std::string backend;       ///< "tilebc-jit" or "tileiras"
  std::string toolchain;     ///< key field 3, from "identity"
  std::string nvjitlink;     ///< key field 8
  std::string options_json;  ///< key field 9: the record's "options" object in canonical form
  std::vector<std::pair<std::string, std::string>> ptx_isa_by_arch;
  /// Key field 7 for `arch`: the recorded version, or "" when the backend emits no PTX for it.
  std::string ptx_isa_for(const std::string& arch) const;
};

/// The cache root, chosen as the Python runtime chooses it: $TILEBC_CACHE_DIR (`~` expanded;
/// "off" in any case disables the cache and returns ""), else the platform's user cache folder
/// ($XDG_CACHE_HOME/tilebc or ~/.cache/tilebc; ~/Library/Caches/tilebc on macOS). A folder that
/// exists but is not a directory, is owned by another user or is writable by group or others is
/// refused in favour of <TMPDIR or /tmp>/tilebc-cache-<uid>, under the same checks; "" when
/// that is refused too.
std::string default_cache_root();

/// Why `directory` cannot be trusted as a cache root, or "" when it can (or does not exist yet).
std::string cache_root_problem(const std::string& directory);

/// Why the cache under `root` cannot be read now, or "": `root`, `root`/v1 and, when given, the
/// shard folder `root`/v1/`shard` must each be a directory owned by this user and not writable by
/// group or others (a missing level is no problem: nothing below it is read). read_toolchain and
/// cache_lookup apply it, and also refuse files that are symlinks, owned by another user or
/// writable by group or others.
std::string cache_trust_problem(const std::string& root, const std::string& shard = "");

/// The records of <root>/v1/toolchain.json in backend-name order (empty when the file does not
/// exist or is not trusted, see cache_trust_problem). Throws Errc::malformed naming the file when
/// it exists but cannot be understood.
std::vector<ToolchainRecord> read_toolchain(const std::string& root);

/// A verified cache entry.
struct CachedCubin {
  std::string key;
  std::string cubin_path;
  std::vector<std::uint8_t> cubin;
  unsigned threads_per_cta = 0;        ///< 0: not recorded
  unsigned dynamic_shared_bytes = 0;
  std::vector<TensorMapRecord> tensor_maps;  ///< TMA kernels: the maps a launch appends
};

/// <root>/v1/<key[0:2]>/<key>.cubin + .json, trusted on the Python runtime's terms: every level
/// passes cache_trust_problem and both files are this user's regular files, not writable by
/// others; the metadata parses, has schema 1, names `key`, and records the cubin's size and
/// sha256 correctly. Anything else is a miss (std::nullopt).
std::optional<CachedCubin> cache_lookup(const std::string& root, const std::string& key);

}  // namespace tilebc
