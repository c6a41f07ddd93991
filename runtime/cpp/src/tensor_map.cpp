#include "tilebc/tensor_map.hpp"

#include <optional>
#include <sstream>

#include "tilebc/error.hpp"
#include "tilebc/json.hpp"
#include "tilebc/loader.hpp"

namespace tilebc {
namespace {

// cuTensorMapEncodeTiled's limits
constexpr unsigned kMaxRank = 5;
constexpr unsigned kMaxBox = 256;
constexpr std::uint64_t kMaxExtent = (std::uint64_t(1) << 32) - 1;
constexpr std::uint64_t kStrideLimit = std::uint64_t(1) << 40;  // byte strides stay below

std::optional<std::int64_t> json_integer(const Json* value) {
  return value && value->is_integer() ? value->as_int64() : std::nullopt;
}

std::string address_hex(std::uint64_t value) {
  std::ostringstream text;
  text << "0x" << std::hex << value;
  return text.str();
}

std::string values_text(const std::vector<std::int64_t>& values) {
  std::string text = "(";
  for (std::size_t index = 0; index < values.size(); ++index)
    text += (index ? ", " : "") + std::to_string(values[index]);
  return text + ")";
}

}  // namespace

unsigned tensor_map_element_bytes(const std::string& element) {
  return element == "f16" || element == "bf16" ? 2 : 0;
}

std::vector<TensorMapRecord> parse_tensor_maps(const Json& list, const std::string& where,
                                               const std::string& file) {
  auto fail = [&](const std::string& what) {
    throw Error(Errc::malformed, where + ": tensor_maps " + what, file);
  };
  if (!list.is_array()) fail("must be a list of map records");
  std::vector<TensorMapRecord> maps;
  for (const Json& item : list.items()) {
    const std::string at = "record " + std::to_string(maps.size());
    if (!item.is_object()) fail(at + " is not an object");
    TensorMapRecord record;
    const Json* param = item.get("param");
    if (!param || !param->is_string() || param->as_string().empty()) fail(at + " has no 'param' name");
    record.param = param->as_string();
    const std::string named = at + " (" + record.param + ")";
    const auto array = json_integer(item.get("array"));
    if (!array || *array < 0 || *array >= (1 << 20)) fail(named + ": 'array' must be a parameter index");
    record.array = static_cast<unsigned>(*array);
    const Json* element = item.get("element");
    if (!element || !element->is_string() || !tensor_map_element_bytes(element->as_string()))
      fail(named + ": element must be f16 or bf16");
    record.element = element->as_string();
    const auto rank = json_integer(item.get("rank"));
    if (!rank || *rank < 1 || *rank > kMaxRank) fail(named + ": rank must be 1..5");
    const Json* interleave = item.get("interleave");
    if (interleave && !(interleave->is_string() && interleave->as_string() == "none"))
      fail(named + ": interleave must be \"none\"");
    const Json* fill = item.get("oob_fill");
    if (fill && !(fill->is_string() && fill->as_string() == "zero")) fail(named + ": oob_fill must be \"zero\"");
    const auto swizzle = json_integer(item.get("swizzle"));
    if (!swizzle || (*swizzle != 0 && *swizzle != 32 && *swizzle != 64 && *swizzle != 128))
      fail(named + ": swizzle must be 0, 32, 64 or 128");
    record.swizzle = static_cast<unsigned>(*swizzle);
    // ["const", n] or ["param", index]; a constant must itself be a valid extent / stride
    // an extent may be 0 (an empty array), a stride may not
    auto values = [&](const char* key, std::size_t count, std::uint64_t least, std::uint64_t limit) {
      const Json* found = item.get(key);
      if (!found || !found->is_array() || found->items().size() != count)
        fail(named + ": '" + key + "' must list " + std::to_string(count) + " values for rank " +
             std::to_string(*rank));
      std::vector<MapValue> out;
      for (const Json& source : found->items()) {
        const bool pair = source.is_array() && source.items().size() == 2 && source.items()[0].is_string();
        const std::string kind = pair ? source.items()[0].as_string() : "";
        const auto number = pair ? json_integer(&source.items()[1]) : std::nullopt;
        if (kind == "param" && number && *number >= 0 && *number < (1 << 20)) {
          out.push_back({true, static_cast<std::uint64_t>(*number)});
        } else if (kind == "const" && number && *number >= 0 &&
                   static_cast<std::uint64_t>(*number) >= least &&
                   static_cast<std::uint64_t>(*number) <= limit) {
          out.push_back({false, static_cast<std::uint64_t>(*number)});
        } else {
          fail(named + ": each of '" + key + "' must be [\"param\", index] or [\"const\", " +
               std::to_string(least) + ".." + std::to_string(limit) + "]");
        }
      }
      return out;
    };
    const std::size_t count = static_cast<std::size_t>(*rank);
    record.dims = values("dims", count, 0, kMaxExtent);
    record.strides = values("strides", count - 1, 1, kStrideLimit / 16);
    const Json* box = item.get("box");
    if (!box || !box->is_array() || box->items().size() != count) fail(named + ": 'box' must list rank values");
    for (const Json& value : box->items()) {
      const auto size = json_integer(&value);
      if (!size || *size < 1 || *size > kMaxBox) fail(named + ": box dims must be 1..256");
      record.box.push_back(static_cast<unsigned>(*size));
    }
    maps.push_back(std::move(record));
  }
  return maps;
}

void check_tensor_maps(const std::vector<TensorMapRecord>& maps, const Entry& entry, const std::string& file) {
  const std::size_t count = entry.params.size();
  for (const TensorMapRecord& record : maps) {
    const std::string who = "entry '" + entry.name + "' tensor map " + record.param;
    if (record.array >= count || entry.params[record.array].kind != ParamKind::pointer)
      throw Error(Errc::malformed, who + ": 'array' " + std::to_string(record.array) +
                                       " is not a pointer parameter of " + entry.signature, file);
    for (const auto* list : {&record.dims, &record.strides})
      for (const MapValue& value : *list)
        if (value.from_param && (value.value >= count || entry.params[value.value].kind != ParamKind::integer))
          throw Error(Errc::malformed, who + ": parameter " + std::to_string(value.value) +
                                           " is not an integer parameter of " + entry.signature, file);
  }
}

TiledMap resolve_tensor_map(const TensorMapRecord& record, const Entry& entry, const std::vector<Arg>& args) {
  check_tensor_maps({record}, entry);
  // A parameter's value as Python reads it: integers signed at their width, pointers unsigned.
  auto value = [&](const MapValue& source) -> std::int64_t {
    if (!source.from_param) return static_cast<std::int64_t>(source.value);
    const unsigned bits = entry.params[source.value].bits;
    const std::uint64_t raw = args.at(source.value).storage;
    if (bits >= 64) return static_cast<std::int64_t>(raw);
    const std::uint64_t sign = std::uint64_t(1) << (bits - 1);
    const std::uint64_t low = raw & ((sign << 1) - 1);
    return static_cast<std::int64_t>(low ^ sign) - static_cast<std::int64_t>(sign);
  };
  const unsigned size = tensor_map_element_bytes(record.element);
  TiledMap map;
  map.param = record.param;
  map.element = record.element;
  map.address = args.at(record.array).storage;
  map.swizzle = record.swizzle;
  map.box.assign(record.box.begin(), record.box.end());
  std::string problem;
  std::vector<std::int64_t> dims, strides;
  for (const MapValue& source : record.dims) dims.push_back(value(source));
  for (const MapValue& source : record.strides) strides.push_back(value(source));
  for (std::int64_t dim : dims) map.dims.push_back(static_cast<std::uint64_t>(dim));
  for (std::int64_t dim : dims)
    if (dim < 0 || static_cast<std::uint64_t>(dim) > kMaxExtent) {
      problem = "extents " + values_text(dims) + ": TMA needs every extent in 1 .. 2^32-1 (0: an empty array)";
      break;
    }
  if (problem.empty() && map.empty()) {
    map.strides.assign(strides.size(), 0);  // nothing is read through them: see over_zeros
  } else if (problem.empty() && map.address % 16) {
    problem = "base address " + address_hex(map.address) + " is not 16-byte aligned";
  } else if (problem.empty()) {
    bool bad = false;
    for (std::int64_t stride : strides) {
      // elements to bytes without overflow: anything at or past the limit is refused anyway
      const bool in_range = stride > 0 && static_cast<std::uint64_t>(stride) < kStrideLimit / size;
      const std::uint64_t bytes = in_range ? static_cast<std::uint64_t>(stride) * size : 0;
      map.strides.push_back(bytes);
      bad = bad || !in_range || bytes % 16;
    }
    if (bad)
      problem = "strides " + values_text(strides) + " of " + std::to_string(size) + "-byte elements: TMA "
                "needs byte strides that are positive multiples of 16 below 2^40";
  }
  if (!problem.empty())
    throw Error(Errc::argument_mismatch, "'" + entry.name + "' tensor map " + record.param + " (argument " +
                                             std::to_string(record.array) + "): " + problem);
  return map;
}

bool TiledMap::empty() const {
  for (std::uint64_t dim : dims)
    if (dim == 0) return true;
  return false;
}

TiledMap over_zeros(const TiledMap& map, std::uint64_t scratch) {
  if (!map.empty()) return map;
  if (scratch % 16)
    throw Error(Errc::driver_error, "tensor map " + map.param + ": zero scratch " + address_hex(scratch) +
                                        " is not 16-byte aligned");
  TiledMap moved = map;
  moved.address = scratch;
  moved.dims.assign(map.dims.size(), 1);
  moved.strides.assign(map.dims.size() - 1, 16);
  return moved;
}

}  // namespace tilebc
