#include "tilebc/cache.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tilebc/bytecode.hpp"
#include "tilebc/error.hpp"
#include "tilebc/json.hpp"
#include "tilebc/sha256.hpp"

namespace tilebc {
namespace {

void add_field(Sha256& hash, const void* data, std::size_t size) {
  std::uint8_t length[8];
  for (int index = 0; index < 8; ++index) length[index] = std::uint8_t(std::uint64_t(size) >> (8 * index));
  hash.update(length, 8);
  hash.update(data, size);
}

void add_field(Sha256& hash, const std::string& text) { add_field(hash, text.data(), text.size()); }

/// Why a cache folder or file with this status may hold another user's data, or "": it must be
/// owned by this user and not writable by group or others (the Python runtime's rule).
std::string foreign_problem(const struct stat& status) {
  if (status.st_uid != ::getuid())
    return "is owned by uid " + std::to_string(status.st_uid) + ", not by this user";
  if (status.st_mode & (S_IWGRP | S_IWOTH)) return "can be written by other users";
  return "";
}

/// Read a cache file, only when it is a regular file (not a symlink) that passes foreign_problem,
/// checked on the opened descriptor so it cannot be swapped between check and read (opening does
/// not block: a FIFO in its place is refused). false when it is missing, unreadable or refused.
bool read_owned(const std::string& path, std::string& text) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat status {};
  bool ok = ::fstat(fd, &status) == 0 && S_ISREG(status.st_mode) && foreign_problem(status).empty();
  text.clear();
  char buffer[1 << 16];
  while (ok) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      ok = got == 0;
      break;
    }
    text.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(fd);
  return ok;
}

std::string string_member(const Json& record, const char* key, const std::string& file) {
  const Json* value = record.get(key);
  if (!value || value->type() == Json::Type::null) return "";
  if (!value->is_string())
    throw Error(Errc::malformed, std::string("toolchain record field '") + key + "' must be a string", file);
  return value->as_string();
}

ToolchainRecord parse_record(const std::string& backend, const Json& record, const std::string& file) {
  const std::string where = "toolchain record '" + backend + "'";
  if (!record.is_object()) throw Error(Errc::malformed, where + " must be an object", file);
  ToolchainRecord result;
  result.backend = backend;
  result.toolchain = string_member(record, "identity", file);
  if (result.toolchain.empty()) throw Error(Errc::malformed, where + " has no 'identity' string", file);
  result.nvjitlink = string_member(record, "nvjitlink", file);
  const Json* options = record.get("options");
  if (options && !options->is_object() && options->type() != Json::Type::null)
    throw Error(Errc::malformed, where + ": 'options' must be an object", file);
  result.options_json = options && options->is_object() ? options->dump() : "{}";
  if (const Json* isa = record.get("ptx_isa")) {
    if (isa->is_object()) {
      for (const auto& member : isa->members()) {
        if (!member.second.is_string())
          throw Error(Errc::malformed, where + ": 'ptx_isa' values must be strings", file);
        result.ptx_isa_by_arch.emplace_back(member.first, member.second.as_string());
      }
    } else if (isa->type() != Json::Type::null) {
      throw Error(Errc::malformed, where + ": 'ptx_isa' must be an object keyed by arch", file);
    }
  }
  return result;
}

std::string trimmed(const char* text) {
  std::string value = text ? text : "";
  const auto begin = value.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return value.substr(begin, value.find_last_not_of(" \t\r\n") - begin + 1);
}

std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string home_directory() {
  if (const char* home = std::getenv("HOME"))
    if (*home) return home;
  if (const passwd* entry = ::getpwuid(::getuid()))
    if (entry->pw_dir) return entry->pw_dir;
  return "";
}

/// mkdir -p with mode 0700 for the folders it creates (as the Python runtime creates them).
bool make_directories(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) == 0) return true;
  const auto slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0 && !make_directories(path.substr(0, slash))) return false;
  return ::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST;
}

/// The root as it is used: created if missing, then checked; "" with `why` set when refused.
std::string usable_root(const std::string& candidate, std::string& why) {
  if (!make_directories(candidate)) {
    why = "cannot be created (" + std::string(std::strerror(errno)) + ")";
    return "";
  }
  why = cache_root_problem(candidate);
  return why.empty() ? candidate : "";
}

}  // namespace

std::string cache_root_problem(const std::string& directory) {
  struct stat status {};
  if (::stat(directory.c_str(), &status) != 0) return "";  // created on first store
  if (!S_ISDIR(status.st_mode)) return "is not a directory";
  if (std::string problem = foreign_problem(status); !problem.empty()) return problem;
  if (::access(directory.c_str(), W_OK | X_OK) != 0) return "is not writable";
  return "";
}

std::string cache_trust_problem(const std::string& root, const std::string& shard) {
  for (const std::string& level : {root, root + "/v1", shard.empty() ? std::string() : root + "/v1/" + shard}) {
    if (level.empty()) continue;
    struct stat status {};
    if (::stat(level.c_str(), &status) != 0) return "";  // nothing below it to read
    if (!S_ISDIR(status.st_mode)) return level + " is not a directory";
    if (std::string problem = foreign_problem(status); !problem.empty()) return level + " " + problem;
  }
  return "";
}

std::string cache_key(const std::uint8_t* bytecode, std::size_t size, const CacheKeyInputs& inputs) {
  Sha256 hash;
  add_field(hash, kCacheMagic);
  add_field(hash, kCacheSchema);
  add_field(hash, inputs.toolchain);
  add_field(hash, bytecode, size);
  add_field(hash, inputs.entry);
  add_field(hash, inputs.arch);
  add_field(hash, inputs.ptx_isa);
  add_field(hash, inputs.nvjitlink);
  add_field(hash, inputs.options_json);
  return hash.hexdigest();
}

std::string ToolchainRecord::ptx_isa_for(const std::string& arch) const {
  for (const auto& pair : ptx_isa_by_arch)
    if (pair.first == arch) return pair.second;
  return "";
}

std::string default_cache_root() {
  const std::string configured = trimmed(std::getenv("TILEBC_CACHE_DIR"));
  if (lowercase(configured) == "off") return "";
  std::string chosen = configured;
  if (!chosen.empty() && chosen[0] == '~' && (chosen.size() == 1 || chosen[1] == '/'))
    chosen = home_directory() + chosen.substr(1);
  if (chosen.empty()) {
#ifdef __APPLE__
    chosen = home_directory() + "/Library/Caches/tilebc";
#else
    const std::string xdg = trimmed(std::getenv("XDG_CACHE_HOME"));
    chosen = (xdg.empty() ? home_directory() + "/.cache" : xdg) + "/tilebc";
#endif
  }
  std::string why;
  if (std::string root = usable_root(chosen, why); !root.empty()) return root;
  // The Python runtime falls back to the same per-user folder under the temp directory.
  const std::string temp = trimmed(std::getenv("TMPDIR"));
  const std::string fallback = (temp.empty() ? std::string("/tmp") : temp) + "/tilebc-cache-" +
                               std::to_string(::getuid());
  return usable_root(fallback, why);
}

std::vector<ToolchainRecord> read_toolchain(const std::string& root) {
  const std::string path = root + "/v1/toolchain.json";
  std::string text;
  // An untrusted folder or file is ignored, as the Python runtime ignores it.
  if (root.empty() || !cache_trust_problem(root).empty() || !read_owned(path, text)) return {};
  const Json document = Json::parse(text, path);
  const Json* schema = document.get("schema");
  if (!schema || schema->as_int64() != std::optional<std::int64_t>(1))
    throw Error(Errc::malformed, "toolchain.json: 'schema' must be 1", path);
  const Json* backends = document.get("backends");
  if (!backends || !backends->is_object())
    throw Error(Errc::malformed, "toolchain.json: 'backends' must be an object keyed by backend", path);
  std::vector<ToolchainRecord> records;
  for (const auto& member : backends->members()) records.push_back(parse_record(member.first, member.second, path));
  return records;
}

std::optional<CachedCubin> cache_lookup(const std::string& root, const std::string& key) {
  if (root.empty() || key.size() < 2 || key.find('/') != std::string::npos) return std::nullopt;
  // Every level must be this user's alone (runtime/CACHE.md, "Trust"): another local user must
  // not be able to plant a cubin that this process then runs.
  if (!cache_trust_problem(root, key.substr(0, 2)).empty()) return std::nullopt;
  const std::string stem = root + "/v1/" + key.substr(0, 2) + "/" + key;
  std::string metadata_text;
  if (!read_owned(stem + ".json", metadata_text)) return std::nullopt;
  Json metadata;
  try {
    metadata = Json::parse(metadata_text, stem + ".json");
  } catch (const Error&) {
    return std::nullopt;  // a damaged entry is a miss; the runtime rewrites it
  }
  // The same trust rules as the Python runtime's reader (cache.py _check_metadata).
  const Json* schema = metadata.get("schema");
  const Json* named = metadata.get("key");
  if (!schema || schema->as_int64() != std::optional<std::int64_t>(1)) return std::nullopt;
  if (!named || !named->is_string() || named->as_string() != key) return std::nullopt;
  const Json* digest = metadata.get("cubin_sha256");
  if (!digest || !digest->is_string()) return std::nullopt;
  const Json* size = metadata.get("cubin_size");
  if (!size || !size->is_integer()) return std::nullopt;
  CachedCubin entry;
  entry.key = key;
  entry.cubin_path = stem + ".cubin";
  std::string cubin;
  if (!read_owned(entry.cubin_path, cubin)) return std::nullopt;
  if (size->as_int64() != std::optional<std::int64_t>(static_cast<std::int64_t>(cubin.size()))) return std::nullopt;
  if (sha256_hex(cubin.data(), cubin.size()) != digest->as_string()) return std::nullopt;
  entry.cubin.assign(cubin.begin(), cubin.end());
  auto unsigned_member = [&](const char* name) -> unsigned {
    const Json* value = metadata.get(name);
    if (!value) return 0;
    const auto number = value->as_int64();
    return number && *number > 0 && *number < (1 << 30) ? static_cast<unsigned>(*number) : 0;
  };
  // a TMA kernel (the JIT's sm_90 default): maps the launch builds; records it cannot read are a miss
  if (const Json* maps = metadata.get("tensor_maps")) {
    try {
      entry.tensor_maps = parse_tensor_maps(*maps, "cache entry " + key, stem + ".json");
    } catch (const Error&) {
      return std::nullopt;
    }
  }
  entry.threads_per_cta = unsigned_member("threads_per_cta");
  entry.dynamic_shared_bytes = unsigned_member("dynamic_shared_bytes");
  return entry;
}

}  // namespace tilebc
