#include "tilebc/fatbin.hpp"

#include <algorithm>
#include <cstring>

#include "format.hpp"
#include "tilebc/json.hpp"
#include "tilebc/sha256.hpp"

namespace tilebc {
namespace {

constexpr std::uint32_t kFatbinMagic = 0xBA55ED50;
constexpr std::uint32_t kRelocatableMagic = 0x466243B1;
constexpr std::uint64_t kEntryArchOffset = 28;  // u32 SM number inside an image header

std::uint64_t load_le(const std::uint8_t* data, unsigned size) {
  std::uint64_t value = 0;
  for (unsigned index = 0; index < size; ++index) value |= std::uint64_t(data[index]) << (8 * index);
  return value;
}

[[noreturn]] void bad(const std::string& file, std::uint64_t offset, const std::string& message) {
  throw Error(Errc::malformed, message, file, offset);
}

}  // namespace

std::vector<FatbinImage> read_fatbin(const std::uint8_t* data, std::size_t size, const std::string& file) {
  std::vector<FatbinImage> images;
  std::uint64_t pos = 0;
  if (size == 0) bad(file, 0, "empty fatbin");
  while (pos < size) {
    if (size - pos < 16) bad(file, pos, "truncated fatbin header: needs 16 bytes");
    const std::uint32_t magic = static_cast<std::uint32_t>(load_le(data + pos, 4));
    if (magic == kRelocatableMagic)
      bad(file, pos, "relocatable fatbin (-c); link it first, the driver loads executable fatbins");
    if (magic != kFatbinMagic) bad(file, pos, "fatbin does not start with the magic 50 ed 55 ba");
    const std::uint64_t header_size = load_le(data + pos + 6, 2);
    const std::uint64_t body_size = load_le(data + pos + 8, 8);
    if (header_size < 16 || header_size > size - pos)
      bad(file, pos + 6, "fatbin header size " + std::to_string(header_size) + " is invalid");
    if (body_size > size - pos - header_size)
      bad(file, pos + 8, "fatbin size " + std::to_string(body_size) + " runs past the end of the file");
    std::uint64_t cursor = pos + header_size;
    const std::uint64_t end = cursor + body_size;
    while (cursor < end) {
      if (end - cursor < 32) bad(file, cursor, "truncated fatbin image header");
      FatbinImage image;
      image.kind = static_cast<unsigned>(load_le(data + cursor, 2));
      const std::uint64_t image_header = load_le(data + cursor + 4, 4);
      image.size = load_le(data + cursor + 8, 8);
      image.arch = static_cast<unsigned>(load_le(data + cursor + kEntryArchOffset, 4));
      if (image_header < 32 || image_header > end - cursor)
        bad(file, cursor + 4, "fatbin image header size " + std::to_string(image_header) + " is invalid");
      if (image.size > end - cursor - image_header)
        bad(file, cursor + 8, "fatbin image of " + std::to_string(image.size) + " bytes runs past its container");
      image.offset = cursor + image_header;
      images.push_back(image);
      cursor = image.offset + image.size;
    }
    pos = end;
    // Containers may be followed by zero padding up to an alignment.
    while (pos < size && data[pos] == 0) ++pos;
  }
  return images;
}

unsigned parse_arch(const std::string& arch) {
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0) return 0;
  unsigned value = 0;
  for (std::size_t index = 3; index < arch.size(); ++index) {
    if (arch[index] < '0' || arch[index] > '9' || value > 10000) return 0;
    value = value * 10 + unsigned(arch[index] - '0');
  }
  return value;
}

Param param_from_type(const std::string& type) {
  Param param;
  param.type = type;
  std::string inner;
  const std::string open = "tile<", close = ">";
  if (type.size() > open.size() + 1 && type.compare(0, open.size(), open) == 0 && type.back() == '>')
    inner = type.substr(open.size(), type.size() - open.size() - 1);
  bool pointer = false;
  if (inner.compare(0, 4, "ptr<") == 0 && !inner.empty() && inner.back() == '>') {
    pointer = true;
    inner = inner.substr(4, inner.size() - 5);
  }
  for (const auto& info : format::kElements) {
    if (inner != info.name) continue;
    param.element = info.name;
    if (pointer) {
      param.kind = ParamKind::pointer;
      param.bits = 64;
      param.size = 8;
    } else {
      param.kind = info.is_float ? ParamKind::floating : ParamKind::integer;
      param.bits = info.bits;
      param.size = info.bits <= 8 ? 1 : info.bits <= 16 ? 2 : info.bits <= 32 ? 4 : 8;
    }
  }
  return param;
}

AotMetadata read_aot_metadata(const std::string& metadata_json, const std::uint8_t* fatbin,
                              std::size_t fatbin_size, const std::string& file) {
  const Json document = Json::parse(metadata_json, file);
  auto need = [&](const Json* value, bool ok, const std::string& what) -> const Json& {
    if (!value || !ok) throw Error(Errc::malformed, "fatbin metadata: " + what, file);
    return *value;
  };
  const Json* format_name = document.get("format");
  need(format_name, format_name && format_name->is_string() && format_name->as_string() == "tilebc-fatbin",
       "'format' must be \"tilebc-fatbin\"");
  const Json* schema = document.get("schema");
  need(schema, schema && schema->as_int64() == std::optional<std::int64_t>(1),
       "unsupported 'schema' (this loader reads schema 1)");
  AotMetadata metadata;
  const Json* digest = document.get("fatbin_sha256");
  need(digest, digest && digest->is_string(), "'fatbin_sha256' must be a string");
  if (sha256_hex(fatbin, fatbin_size) != digest->as_string())
    throw Error(Errc::malformed,
                "fatbin metadata does not describe this fatbin (its sha256 differs); regenerate both "
                "with `tilebc compile FILE --arch ... --fatbin -o OUT`",
                file);
  if (const Json* toolchain = document.get("toolchain"))
    if (toolchain->is_string()) metadata.toolchain = toolchain->as_string();
  if (const Json* bytecode = document.get("bytecode")) {
    if (const Json* sha = bytecode->get("sha256"))
      if (sha->is_string()) metadata.bytecode_sha256 = sha->as_string();
    if (const Json* version = bytecode->get("version")) {
      if (version->is_string()) {
        const std::string& text = version->as_string();
        const auto dot = text.find('.');
        if (dot != std::string::npos) {
          metadata.bytecode_version.major = std::atoi(text.substr(0, dot).c_str());
          metadata.bytecode_version.minor = std::atoi(text.substr(dot + 1).c_str());
        }
      }
    }
  }
  const Json& archs = need(document.get("archs"), document.get("archs") && document.get("archs")->is_array(),
                           "'archs' must be an array");
  const auto images = read_fatbin(fatbin, fatbin_size, file);
  for (const Json& arch : archs.items()) {
    const unsigned number = arch.is_string() ? parse_arch(arch.as_string()) : 0;
    if (!number) throw Error(Errc::malformed, "fatbin metadata: bad arch in 'archs'", file);
    const bool present = std::any_of(images.begin(), images.end(), [&](const FatbinImage& image) {
      return image.kind == 2 && image.arch == number;
    });
    if (!present)
      throw Error(Errc::malformed, "fatbin metadata lists " + arch.as_string() +
                                       " but the fatbin has no cubin for it", file);
    metadata.archs.push_back(arch.as_string());
  }
  // Optional PTX image: {"arch": "sm_90", ...}; it must be in the fatbin as a PTX image.
  const Json* ptx = document.get("ptx");
  if (ptx && ptx->type() != Json::Type::null) {
    const Json* arch = ptx->get("arch");
    const unsigned number = arch && arch->is_string() ? parse_arch(arch->as_string()) : 0;
    if (!ptx->is_object() || !number)
      throw Error(Errc::malformed, "fatbin metadata: 'ptx' must be null or {\"arch\": \"sm_XY\", ...}", file);
    const bool present = std::any_of(images.begin(), images.end(), [&](const FatbinImage& image) {
      return image.kind == 1 && image.arch == number;
    });
    if (!present)
      throw Error(Errc::malformed, "fatbin metadata lists PTX for " + arch->as_string() +
                                       " but the fatbin has no PTX image for it", file);
    metadata.ptx_arch = arch->as_string();
  }
  const Json& entries = need(document.get("entries"),
                             document.get("entries") && document.get("entries")->is_array(),
                             "'entries' must be an array");
  for (const Json& item : entries.items()) {
    const Json* name = item.get("name");
    need(name, name && name->is_string() && !name->as_string().empty(), "entry without a 'name'");
    Entry entry;
    entry.name = name->as_string();
    const Json* params = item.get("params");
    need(params, params && params->is_array(), "entry '" + entry.name + "' has no 'params' array");
    std::string signature = "(";
    for (const Json& param : params->items()) {
      need(&param, param.is_string(), "entry '" + entry.name + "' has a non-string param type");
      if (signature.size() > 1) signature += ", ";
      signature += param.as_string();
      entry.params.push_back(param_from_type(param.as_string()));
    }
    entry.signature = signature + ") -> ()";
    std::vector<LaunchInfo> launch;
    const Json* launch_json = item.get("launch");
    need(launch_json, launch_json && launch_json->is_object(), "entry '" + entry.name + "' has no 'launch' object");
    for (const std::string& arch : metadata.archs) {
      const Json* facts = launch_json->get(arch);
      need(facts, facts && facts->is_object(), "entry '" + entry.name + "' has no launch facts for " + arch);
      LaunchInfo info;
      info.arch = arch;
      const Json* threads = facts->get("threads_per_cta");
      const auto count = threads ? threads->as_int64() : std::nullopt;
      need(threads, count && *count > 0 && *count <= 1024,
           "entry '" + entry.name + "' needs threads_per_cta in 1..1024 for " + arch);
      info.threads_per_cta = static_cast<unsigned>(*count);
      if (const Json* shared = facts->get("dynamic_shared_bytes")) {
        const auto bytes = shared->as_int64();
        need(shared, bytes && *bytes >= 0 && *bytes < (1 << 30), "bad dynamic_shared_bytes");
        info.dynamic_shared_bytes = static_cast<unsigned>(*bytes);
      }
      if (const Json* maps = facts->get("tensor_maps")) {
        info.tensor_maps = parse_tensor_maps(*maps, "fatbin metadata: entry '" + entry.name + "' for " + arch, file);
        check_tensor_maps(info.tensor_maps, entry, file);
      }
      launch.push_back(info);
    }
    LaunchInfo ptx_info;
    ptx_info.arch = metadata.ptx_arch;
    if (!metadata.ptx_arch.empty()) {
      const Json* facts = item.get("ptx_launch");
      const Json* threads = facts ? facts->get("threads_per_cta") : nullptr;
      const auto count = threads ? threads->as_int64() : std::nullopt;
      need(threads, count && *count > 0 && *count <= 1024,
           "entry '" + entry.name + "' needs ptx_launch.threads_per_cta in 1..1024");
      ptx_info.threads_per_cta = static_cast<unsigned>(*count);
      if (const Json* shared = facts->get("dynamic_shared_bytes")) {
        const auto bytes = shared->as_int64();
        need(shared, bytes && *bytes >= 0 && *bytes < (1 << 30), "bad dynamic_shared_bytes");
        ptx_info.dynamic_shared_bytes = static_cast<unsigned>(*bytes);
      }
      if (const Json* maps = facts->get("tensor_maps")) {
        ptx_info.tensor_maps = parse_tensor_maps(*maps, "fatbin metadata: entry '" + entry.name + "' PTX", file);
        check_tensor_maps(ptx_info.tensor_maps, entry, file);
      }
    }
    metadata.entries.push_back(std::move(entry));
    metadata.launch.push_back(std::move(launch));
    metadata.ptx_launch.push_back(ptx_info);
  }
  return metadata;
}

}  // namespace tilebc
