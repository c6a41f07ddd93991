#include "tilebc/cache.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

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

bool read_text(const std::string& path, std::string& text) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) return false;
  std::ostringstream buffer;
  buffer << stream.rdbuf();
  text = buffer.str();
  return !stream.bad();
}

std::string string_member(const Json& record, const char* key, const std::string& file) {
  const Json* value = record.get(key);
  if (!value || value->type() == Json::Type::null) return "";
  if (!value->is_string())
    throw Error(Errc::malformed, std::string("toolchain record field '") + key + "' must be a string", file);
  return value->as_string();
}

ToolchainRecord parse_record(const Json& record, const std::string& file) {
  if (!record.is_object()) throw Error(Errc::malformed, "toolchain record must be an object", file);
  ToolchainRecord result;
  result.toolchain = string_member(record, "toolchain", file);
  if (result.toolchain.empty())
    throw Error(Errc::malformed, "toolchain record has no 'toolchain' string", file);
  result.nvjitlink = string_member(record, "nvjitlink", file);
  const Json* options = record.get("options");
  result.options_json = options ? options->dump() : "{}";
  if (const Json* isa = record.get("ptx_isa")) {
    if (isa->is_string()) {
      result.ptx_isa_default = isa->as_string();
    } else if (isa->is_object()) {
      for (const auto& member : isa->members()) {
        if (!member.second.is_string())
          throw Error(Errc::malformed, "ptx_isa values must be strings", file);
        if (member.first == "default") result.ptx_isa_default = member.second.as_string();
        else result.ptx_isa_by_arch.emplace_back(member.first, member.second.as_string());
      }
    } else if (isa->type() != Json::Type::null) {
      throw Error(Errc::malformed, "ptx_isa must be a string or an object keyed by arch", file);
    }
  }
  return result;
}

}  // namespace

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
  return ptx_isa_default;
}

std::string default_cache_root() {
  if (const char* configured = std::getenv("TILEBC_CACHE_DIR")) {
    const std::string value = configured;
    if (value == "off") return "";
    if (!value.empty()) return value;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"))
    if (*xdg) return std::string(xdg) + "/tilebc";
  if (const char* home = std::getenv("HOME"))
    if (*home) return std::string(home) + "/.cache/tilebc";
  return "";
}

std::vector<ToolchainRecord> read_toolchain(const std::string& root) {
  const std::string path = root + "/v1/toolchain.json";
  std::string text;
  if (root.empty() || !read_text(path, text)) return {};
  const Json document = Json::parse(text, path);
  std::vector<ToolchainRecord> records;
  if (const Json* backends = document.get("backends")) {
    if (!backends->is_array()) throw Error(Errc::malformed, "'backends' must be an array", path);
    for (const Json& record : backends->items()) records.push_back(parse_record(record, path));
  } else {
    records.push_back(parse_record(document, path));
  }
  return records;
}

std::optional<CachedCubin> cache_lookup(const std::string& root, const std::string& key) {
  if (root.empty() || key.size() < 2) return std::nullopt;
  const std::string stem = root + "/v1/" + key.substr(0, 2) + "/" + key;
  std::string metadata_text;
  if (!read_text(stem + ".json", metadata_text)) return std::nullopt;
  Json metadata;
  try {
    metadata = Json::parse(metadata_text, stem + ".json");
  } catch (const Error&) {
    return std::nullopt;  // a damaged entry is a miss; the runtime rewrites it
  }
  const Json* digest = metadata.get("cubin_sha256");
  if (!digest || !digest->is_string()) return std::nullopt;
  CachedCubin entry;
  entry.key = key;
  entry.cubin_path = stem + ".cubin";
  std::string cubin;
  if (!read_text(entry.cubin_path, cubin)) return std::nullopt;
  if (const Json* size = metadata.get("cubin_size"))
    if (size->as_int64() != std::optional<std::int64_t>(static_cast<std::int64_t>(cubin.size())))
      return std::nullopt;
  if (sha256_hex(cubin.data(), cubin.size()) != digest->as_string()) return std::nullopt;
  entry.cubin.assign(cubin.begin(), cubin.end());
  auto unsigned_member = [&](const char* name) -> unsigned {
    const Json* value = metadata.get(name);
    if (!value) return 0;
    const auto number = value->as_int64();
    return number && *number > 0 && *number < (1 << 30) ? static_cast<unsigned>(*number) : 0;
  };
  entry.threads_per_cta = unsigned_member("threads_per_cta");
  entry.dynamic_shared_bytes = unsigned_member("dynamic_shared_bytes");
  return entry;
}

}  // namespace tilebc
