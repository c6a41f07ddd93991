#include "tilebc/json.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tilebc/error.hpp"

namespace tilebc {

Json Json::boolean(bool value) {
  Json json;
  json.type_ = Type::boolean;
  json.boolean_ = value;
  return json;
}

Json Json::integer(std::int64_t value) {
  Json json;
  json.type_ = Type::integer;
  json.text_ = std::to_string(value);
  json.number_ = static_cast<double>(value);
  return json;
}

Json Json::number(double value) {
  Json json;
  json.type_ = Type::number;
  json.number_ = value;
  return json;
}

Json Json::string(std::string value) {
  Json json;
  json.type_ = Type::string;
  json.text_ = std::move(value);
  return json;
}

Json Json::array(std::vector<Json> items) {
  Json json;
  json.type_ = Type::array;
  json.items_ = std::move(items);
  return json;
}

Json Json::object(std::map<std::string, Json> members) {
  Json json;
  json.type_ = Type::object;
  json.members_ = std::move(members);
  return json;
}

std::optional<std::int64_t> Json::as_int64() const {
  if (type_ != Type::integer) return std::nullopt;
  std::int64_t value = 0;
  const char* first = text_.data();
  const char* last = first + text_.size();
  auto result = std::from_chars(first, last, value);
  if (result.ec != std::errc() || result.ptr != last) return std::nullopt;
  return value;
}

const Json* Json::get(const std::string& key) const {
  if (type_ != Type::object) return nullptr;
  auto found = members_.find(key);
  return found == members_.end() ? nullptr : &found->second;
}

class JsonParser {
 public:
  JsonParser(const std::string& text, const std::string& file) : text_(text), file_(file) {}

  Json document() {
    Json value = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw Error(Errc::malformed, "invalid JSON: " + message, file_, pos_);
  }

  void skip_space() {
    while (pos_ < text_.size() && std::strchr(" \t\r\n", text_[pos_]) && text_[pos_]) ++pos_;
  }

  bool literal(const char* word) {
    const std::size_t length = std::strlen(word);
    if (text_.compare(pos_, length, word) != 0) return false;
    pos_ += length;
    return true;
  }

  Json parse_value(int depth) {
    if (depth > 64) fail("nested too deeply");
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end of input");
    const char head = text_[pos_];
    if (head == '{') return parse_object(depth);
    if (head == '[') return parse_array(depth);
    if (head == '"') return Json::string(parse_string());
    if (literal("true")) return Json::boolean(true);
    if (literal("false")) return Json::boolean(false);
    if (literal("null")) return Json();
    if (head == '-' || (head >= '0' && head <= '9')) return parse_number();
    fail(std::string("unexpected character '") + head + "'");
  }

  Json parse_object(int depth) {
    Json json = Json::object();
    ++pos_;
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return json;
    }
    while (true) {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string key");
      std::string key = parse_string();
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != ':') fail("expected ':'");
      ++pos_;
      json.members_[key] = parse_value(depth + 1);  // a repeated key keeps the last value, as Python
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return json;
      }
      fail("expected ',' or '}'");
    }
  }

  Json parse_array(int depth) {
    Json json = Json::array();
    ++pos_;
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return json;
    }
    while (true) {
      json.items_.push_back(parse_value(depth + 1));
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return json;
      }
      fail("expected ',' or ']'");
    }
  }

  unsigned hex4() {
    if (text_.size() - pos_ < 4) fail("truncated \\u escape");
    unsigned value = 0;
    for (int index = 0; index < 4; ++index) {
      const char digit = text_[pos_++];
      value <<= 4;
      if (digit >= '0' && digit <= '9') value |= digit - '0';
      else if (digit >= 'a' && digit <= 'f') value |= digit - 'a' + 10;
      else if (digit >= 'A' && digit <= 'F') value |= digit - 'A' + 10;
      else fail("bad \\u escape");
    }
    return value;
  }

  static void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += char(code);
    } else if (code < 0x800) {
      out += char(0xC0 | (code >> 6));
      out += char(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += char(0xE0 | (code >> 12));
      out += char(0x80 | ((code >> 6) & 0x3F));
      out += char(0x80 | (code & 0x3F));
    } else {
      out += char(0xF0 | (code >> 18));
      out += char(0x80 | ((code >> 12) & 0x3F));
      out += char(0x80 | ((code >> 6) & 0x3F));
      out += char(0x80 | (code & 0x3F));
    }
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated string");
      const char escape = text_[pos_++];
      switch (escape) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned code = hex4();
          if (code >= 0xD800 && code < 0xDC00 && text_.compare(pos_, 2, "\\u") == 0) {
            const std::size_t mark = pos_;
            pos_ += 2;
            const unsigned low = hex4();
            if (low >= 0xDC00 && low < 0xE000) code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            else pos_ = mark;
          }
          append_utf8(out, code);
          break;
        }
        default: fail("bad escape");
      }
    }
  }

  Json parse_number() {
    const std::size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    bool is_float = false;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c >= '0' && c <= '9') ++pos_;
      else if (c == '.' || c == 'e' || c == 'E' || c == '+' || (c == '-' && pos_ > start)) {
        is_float = true;
        ++pos_;
      } else break;
    }
    const std::string digits = text_.substr(start, pos_ - start);
    if (digits == "-" || digits.empty()) fail("bad number");
    Json json;
    char* end = nullptr;
    json.number_ = std::strtod(digits.c_str(), &end);
    if (end != digits.c_str() + digits.size()) fail("bad number");
    if (is_float) {
      json.type_ = Json::Type::number;
    } else {
      json.type_ = Json::Type::integer;
      json.text_ = digits == "-0" ? "0" : digits;
    }
    return json;
  }

  const std::string& text_;
  const std::string& file_;
  std::size_t pos_ = 0;
};

Json Json::parse(const std::string& text, const std::string& file) {
  return JsonParser(text, file).document();
}

namespace {

// Length of the valid UTF-8 sequence (no overlongs, surrogates or code points above U+10FFFF) that
// starts at `index`, or 0 when none does.
unsigned utf8_sequence(const std::string& text, std::size_t index) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[index + k]); };
  const unsigned lead = byte(0);
  unsigned length;
  unsigned low = 0x80, high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (text.size() - index < length) return 0;
  if (byte(1) < low || byte(1) > high) return 0;
  for (unsigned k = 2; k < length; ++k)
    if (byte(k) < 0x80 || byte(k) > 0xBF) return 0;
  return length;
}

void dump_string(std::string& out, const std::string& text) {
  static const char digits[] = "0123456789abcdef";
  auto escape = [&](unsigned code) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += digits[(code >> shift) & 15];
  };
  out += '"';
  for (std::size_t index = 0; index < text.size();) {
    const auto c = static_cast<unsigned char>(text[index]);
    if (c < 0x80) {
      ++index;
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) escape(c);
          else out += char(c);
      }
      continue;
    }
    // One strict UTF-8 sequence; a byte that does not start one is written as U+DC00 + byte, the
    // lone surrogate Python's "surrogateescape" decoding gives it (strings are raw bytes).
    const unsigned length = utf8_sequence(text, index);
    if (length == 0) {
      escape(0xDC00 + c);
      ++index;
      continue;
    }
    unsigned code = length == 4 ? c & 0x07 : length == 3 ? c & 0x0F : c & 0x1F;
    for (unsigned k = 1; k < length; ++k) code = (code << 6) | (text[index + k] & 0x3F);
    index += length;
    if (code >= 0x10000) {
      code -= 0x10000;
      escape(0xD800 + (code >> 10));
      escape(0xDC00 + (code & 0x3FF));
    } else {
      escape(code);
    }
  }
  out += '"';
}

// Python's float repr: shortest round-trip digits; fixed notation for exponents in [-4, 16).
std::string python_float(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value < 0 ? "-Infinity" : "Infinity";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string text(buffer, result.ptr);
  const std::size_t e = text.find('e');
  std::string mantissa = text.substr(0, e);
  const int exponent = std::atoi(text.c_str() + e + 1);
  std::string sign;
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  if (exponent >= -4 && exponent < 16) {
    std::string out;
    if (exponent < 0) {
      out = "0." + std::string(-exponent - 1, '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out = digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
    return sign + out;
  }
  std::string out = digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_text[16];
  std::snprintf(exp_text, sizeof exp_text, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return sign + out + exp_text;
}

void dump_value(std::string& out, const Json& value) {
  switch (value.type()) {
    case Json::Type::null: out += "null"; return;
    case Json::Type::boolean: out += value.as_bool() ? "true" : "false"; return;
    case Json::Type::integer: out += value.as_string(); return;
    case Json::Type::number: out += python_float(value.as_double()); return;
    case Json::Type::string: dump_string(out, value.as_string()); return;
    case Json::Type::array: {
      out += '[';
      bool first = true;
      for (const Json& item : value.items()) {
        if (!first) out += ',';
        first = false;
        dump_value(out, item);
      }
      out += ']';
      return;
    }
    case Json::Type::object: {
      out += '{';
      bool first = true;
      for (const auto& member : value.members()) {
        if (!first) out += ',';
        first = false;
        dump_string(out, member.first);
        out += ':';
        dump_value(out, member.second);
      }
      out += '}';
      return;
    }
  }
}

}  // namespace

std::string Json::dump() const {
  std::string out;
  dump_value(out, *this);
  return out;
}

}  // namespace tilebc
