// A small JSON value, parser and canonical writer: enough for cache metadata, toolchain.json and
// fatbin metadata, and for the cache key's "canonical JSON" field (Python's
// json.dumps(obj, sort_keys=True, separators=(",", ":"))).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tilebc {

class Json {
 public:
  enum class Type { null, boolean, integer, number, string, array, object };

  Json() = default;
  static Json boolean(bool value);
  static Json integer(std::int64_t value);
  static Json number(double value);
  static Json string(std::string value);
  static Json array(std::vector<Json> items = {});
  static Json object(std::map<std::string, Json> members = {});

  /// Parse `text`; throws tilebc::Error (Errc::malformed) naming `file` and the offset.
  static Json parse(const std::string& text, const std::string& file = {});

  Type type() const { return type_; }
  bool is_object() const { return type_ == Type::object; }
  bool is_array() const { return type_ == Type::array; }
  bool is_string() const { return type_ == Type::string; }
  bool is_integer() const { return type_ == Type::integer; }

  bool as_bool() const { return boolean_; }
  /// Integers are kept as their decimal text so that any size survives a round trip.
  std::optional<std::int64_t> as_int64() const;
  double as_double() const { return number_; }
  const std::string& as_string() const { return text_; }
  const std::vector<Json>& items() const { return items_; }
  const std::map<std::string, Json>& members() const { return members_; }
  std::map<std::string, Json>& members() { return members_; }
  std::vector<Json>& items() { return items_; }

  /// Member `key` of an object, or nullptr.
  const Json* get(const std::string& key) const;

  /// Canonical text: sorted keys, "," and ":" separators, ASCII only (\uXXXX escapes), floats as
  /// Python's repr. Equal to json.dumps(value, sort_keys=True, separators=(",", ":")).
  std::string dump() const;

 private:
  friend class JsonParser;
  Type type_ = Type::null;
  bool boolean_ = false;
  double number_ = 0;
  std::string text_;  // string value, or an integer's digits
  std::vector<Json> items_;
  std::map<std::string, Json> members_;
};

}  // namespace tilebc
