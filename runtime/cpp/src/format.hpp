// Format facts shared by the reader's modules; the values come from the generated table file.
#pragma once

#include <cstdint>

namespace tilebc {
namespace format {

struct Version {
  int major;
  int minor;
  constexpr bool operator<(const Version& other) const {
    return major < other.major || (major == other.major && minor < other.minor);
  }
  constexpr bool operator>(const Version& other) const { return other < *this; }
  constexpr bool operator<=(const Version& other) const { return !(other < *this); }
  constexpr bool operator>=(const Version& other) const { return !(*this < other); }
};

struct SectionInfo {
  unsigned id;
  const char* name;
  unsigned alignment;  // 0: the section needs no alignment flag
  bool mandatory;
};

struct ElementInfo {
  unsigned tag;
  const char* name;
  unsigned bits;
  bool is_float;
  Version since;
};

struct CompositeInfo {
  unsigned tag;
  Version since;
};

struct EnumInfo {
  std::uint64_t value;
  const char* keyword;
  Version since;
};

#include "format_tables.inc"

}  // namespace format
}  // namespace tilebc
