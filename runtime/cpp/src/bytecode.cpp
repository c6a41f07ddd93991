// The container reader. It follows tilebc/binary/reader.py step for step (same checks, same
// order, same messages) for everything up to function bodies, so the two readers agree on which
// files are malformed at that level; see BytecodeInfo::undecoded for what it does not decode.
// Deviations NVIDIA's reader accepts go through ModuleReader::lenient, as in reader.py: a warning
// by default (the bytes read as tileirdisasm reads them), the same error when strict.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <set>
#include <sstream>

#include "format.hpp"
#include "tilebc/bytecode.hpp"

namespace tilebc {
namespace {

namespace F = format;

constexpr std::int64_t kDynamic = INT64_MIN;  // `?` dims and strides
// Characters of type text the entries of one module may spell out together (signatures, their
// parameters and results); entries can share a signature of up to kMaxTypeText characters.
constexpr std::uint64_t kMaxEntryText = std::uint64_t(1) << 25;
static_assert(ReadOptions{}.max_overlap_bytes == F::kMaxOverlapBytes,
              "ReadOptions' default overlap limit must be Python's DecodeLimits default");
static_assert(ReadOptions{}.max_tile_elements == F::kMaxTileElements,
              "ReadOptions' default tile element limit must be Python's DecodeLimits default");

std::string hex(std::uint64_t value) {
  char buffer[24];
  std::snprintf(buffer, sizeof buffer, "%llx", static_cast<unsigned long long>(value));
  return buffer;
}

// Python's f"{byte:02x}".
std::string two_hex(unsigned byte) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "%02x", byte & 0xFF);
  return buffer;
}

std::string version_text(const F::Version& version) {
  return std::to_string(version.major) + "." + std::to_string(version.minor);
}

// Python's repr() of a plain string, enough for messages ('name').
std::string quoted(const std::string& text) { return "'" + text + "'"; }

[[noreturn]] void fail(const std::string& file, std::uint64_t offset, const std::string& message) {
  throw Error(Errc::malformed, message, file, offset);
}

/// A cursor over data[pos, end) of the whole file; positions are absolute file offsets.
struct Cursor {
  const std::uint8_t* data;
  std::uint64_t pos;
  std::uint64_t end;
  const std::string* file;

  std::uint64_t remaining() const { return end > pos ? end - pos : 0; }
  bool at_end() const { return pos >= end; }

  [[noreturn]] void error(const std::string& message) const { fail(*file, pos, message); }
  [[noreturn]] void error_at(std::uint64_t offset, const std::string& message) const {
    fail(*file, offset, message);
  }

  void need(std::uint64_t count, const std::string& what) const {
    if (count > remaining())
      error("truncated input: " + what + " needs " + std::to_string(count) + " bytes, " +
            std::to_string(remaining()) + " remain");
  }

  Cursor sub(std::uint64_t length, const std::string& what) {
    need(length, what);
    Cursor inner{data, pos, pos + length, file};
    pos += length;
    return inner;
  }

  // LEB128, at most 10 bytes, value within 64 bits (NVIDIA's reader has the same limits).
  std::uint64_t varint(const std::string& what = "varint") {
    const std::uint64_t start = pos;
    std::uint64_t result = 0;
    for (unsigned index = 0;; ++index) {
      if (pos >= end) error_at(start, "truncated input: unterminated " + what);
      const std::uint8_t byte = data[pos++];
      const std::uint64_t bits = byte & 0x7F;
      if (index == 9 && bits > 1) {
        if (byte >= 0x80) error_at(start, what + " is longer than 10 bytes");
        error_at(start, what + " does not fit in 64 bits");
      }
      result |= bits << (7 * index);
      if (byte < 0x80) return result;
      if (index == 9) error_at(start, what + " is longer than 10 bytes");
    }
  }

  std::int64_t zigzag(const std::string& what) {
    const std::uint64_t raw = varint(what);
    return static_cast<std::int64_t>((raw >> 1) ^ (0 - (raw & 1)));
  }

  /// A varint element count, checked against the bytes that remain.
  std::uint64_t count(const std::string& what, std::uint64_t min_bytes_each = 1) {
    const std::uint64_t start = pos;
    const std::uint64_t value = varint(what);
    if (min_bytes_each && value > remaining() / min_bytes_each)
      error_at(start, what + " " + std::to_string(value) + " exceeds the " +
                          std::to_string(remaining()) + " bytes that remain");
    return value;
  }

  std::uint8_t u8(const std::string& what = "byte") {
    if (pos >= end) error("truncated input: expected " + what);
    return data[pos++];
  }

  std::uint64_t fixed(unsigned size, const std::string& what) {
    need(size, what);
    std::uint64_t value = 0;
    for (unsigned index = 0; index < size; ++index)
      value |= static_cast<std::uint64_t>(data[pos + index]) << (8 * index);
    pos += size;
    return value;
  }

  /// varint count + `width`-byte little-endian signed integers.
  std::vector<std::int64_t> int_array(unsigned width, const std::string& what) {
    const std::uint64_t length = count(what + " length", width);
    std::vector<std::int64_t> values;
    values.reserve(length);
    for (std::uint64_t index = 0; index < length; ++index) {
      std::uint64_t raw = fixed(width, what);
      if (width < 8 && (raw >> (8 * width - 1)) & 1) raw |= ~std::uint64_t(0) << (8 * width);
      values.push_back(static_cast<std::int64_t>(raw));
    }
    return values;
  }

  /// Skip 0xCB padding up to a multiple of `alignment` of the absolute offset. The first byte
  /// other than 0xCB goes to `on_bad(message, offset)` (which may throw).
  void align(unsigned alignment, const std::string& what,
             const std::function<void(const std::string&, std::uint64_t)>& on_bad) {
    const std::uint64_t pad = (alignment - pos % alignment) % alignment;
    need(pad, "padding before " + what);
    for (std::uint64_t index = 0; index < pad; ++index) {
      if (data[pos + index] != F::kPaddingByte) {
        on_bad("padding byte before " + what + " is 0x" + two_hex(data[pos + index]) +
                   ", expected 0xCB",
               pos + index);
        break;
      }
    }
    pos += pad;
  }
};

/// Python's str(list): "[1, 2]".
std::string list_text(const std::vector<std::int64_t>& values, const char* separator = ", ") {
  std::string text = "[";
  for (std::size_t index = 0; index < values.size(); ++index) {
    if (index) text += separator;
    text += std::to_string(values[index]);
  }
  return text + "]";
}

std::string dims_text(const std::vector<std::int64_t>& values, const char* separator) {
  std::string text;
  for (std::size_t index = 0; index < values.size(); ++index) {
    if (index) text += separator;
    text += values[index] == kDynamic ? std::string("?") : std::to_string(values[index]);
  }
  return text;
}

enum class Kind { element, pointer, tile, tensor_view, partition_view, gather_scatter_view,
                  strided_view, function, token };

// Types refer to other entries of the type table, which may be shared: a view refers to a tensor
// view, a function type to any type. The full text (tilebc's str(type)) is therefore built only
// when asked for (type_text): a node keeps its own part of the text and the length of the whole,
// so n table entries cost memory proportional to their bytes even where their text is 2^n long.
struct TypeNode {
  Kind kind = Kind::token;
  std::string text;                           // whole text; for views the part before the view
  std::string suffix;                         // views: the part after the tensor view's text
  const TypeNode* view = nullptr;             // views: the tensor view
  std::uint64_t text_size = 0;                // characters of the whole text
  const F::ElementInfo* element = nullptr;    // element types; pointee for pointers
  const TypeNode* tile_element = nullptr;     // tiles: element or pointer type
  std::vector<std::int64_t> shape;            // tiles
  std::vector<const TypeNode*> inputs, results;  // functions
};

void append_type_text(const TypeNode& node, std::string& out) {
  if (node.kind == Kind::function) {
    out += "(";
    for (std::size_t index = 0; index < node.inputs.size(); ++index) {
      if (index) out += ", ";
      append_type_text(*node.inputs[index], out);
    }
    out += ") -> (";
    for (std::size_t index = 0; index < node.results.size(); ++index) {
      if (index) out += ", ";
      append_type_text(*node.results[index], out);
    }
    out += ")";
    return;
  }
  out += node.text;
  if (node.view) {
    out += node.view->text;
    out += node.suffix;
  }
}

/// The Tile IR spelling of a type; its length is bounded by kMaxTypeText for function types (the
/// reader refuses longer ones) and by the entry's bytes for the others.
std::string type_text(const TypeNode& node) {
  std::string out;
  out.reserve(node.text_size);
  append_type_text(node, out);
  return out;
}

/// A type as messages show it: its text, cut to 200 characters followed by "…" when longer (the
/// Python reader's tilebc.ir.shared.brief).
std::string brief_text(const TypeNode& node) {
  std::string text = type_text(node);
  if (text.size() > 200) {
    text.resize(200);
    text += "\xe2\x80\xa6";
  }
  return text;
}

struct Section {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  bool present = false;
};

// How entries of a table whose offsets are out of order are sliced (container.py): exactly (any
// disorder is an error: strict mode, and constants in every mode), clamped (strings), or checked
// when an entry is used (types).
enum class Slicing { exact, clamped, checked_on_use };

/// An offset-indexed table: entry i runs from offsets[i] to offsets[i + 1] (the last to the end).
struct Table {
  std::string what;
  std::uint64_t data_begin = 0;  // absolute offset of the entries' data
  std::uint64_t data_size = 0;
  std::vector<std::uint64_t> offsets;
  Slicing slicing = Slicing::exact;  // exact also for a lenient table that is in order
  std::uint64_t budget = 0;          // overlap allowance left, for a disordered table
  std::uint64_t size() const { return offsets.size(); }
};

constexpr const char* kPaddingAction = "padding is not read (tileirdisasm does not look at it)";
constexpr const char* kLeftoverAction = "they are not read (tileirdisasm ignores them)";
constexpr const char* kTrueAction = "read as true, as tileirdisasm takes any non-zero byte";

/// Attribute kinds the function table cares about.
enum class AttrKind { other, array, dictionary, hints };

class ModuleReader {
 public:
  ModuleReader(const std::uint8_t* data, std::size_t size, const std::string& file,
               const ReadOptions& options)
      : data_(data), size_(size), file_(file), options_(options) {}

  BytecodeInfo read();

 private:
  Cursor cursor(std::uint64_t begin, std::uint64_t end) const { return {data_, begin, end, &file_}; }
  [[noreturn]] void error(std::uint64_t offset, const std::string& message) const {
    fail(file_, offset, message);
  }

  /// A deviation NVIDIA's reader accepts: an error when strict, else a warning (each message and
  /// offset once), and the caller reads on as `action` says.
  void lenient(const std::string& message, std::uint64_t offset, const std::string& action);
  void frame_sections();
  Table read_table(const Section& section, unsigned width, const std::string& what, Slicing slicing);
  std::pair<std::uint64_t, std::uint64_t> entry(Table& table, std::uint64_t index);
  void check_unused_types();
  const std::string& string(std::uint64_t index, std::uint64_t offset);
  const TypeNode& type(std::uint64_t index, std::uint64_t offset);
  const TypeNode& type_ref(Cursor& reader, const std::string& what);
  const TypeNode& element(Cursor& reader, const std::string& what, bool allow_pointer = false);
  const TypeNode& tensor_view(Cursor& reader);
  std::uint64_t enumeration(Cursor& reader, const F::EnumInfo* members, std::size_t count,
                            const char* enum_name, const std::string& what);
  void decode_type(Cursor& reader, TypeNode& node);
  void check_flags(std::uint64_t flags, std::uint64_t known, const std::string& what,
                   std::uint64_t offset) const;
  void dense(const TypeNode& tile_type, std::uint64_t index, std::uint64_t offset);
  AttrKind tagged_attr(Cursor& reader, int depth = 0);
  void dictionary_body(Cursor& reader, int depth, bool hints);
  std::int64_t int_value(Cursor& reader, unsigned width, const std::string& what);
  bool boolean(Cursor& reader, const std::string& what);
  void read_debug(const Section& section);
  Entry read_function(Cursor& reader);
  Param describe_param(const TypeNode& type) const;

  const std::uint8_t* data_;
  std::uint64_t size_;
  const std::string& file_;
  const ReadOptions& options_;
  std::set<std::pair<std::string, std::uint64_t>> warned_;
  F::Version version_{0, 0};
  Section sections_[8];
  Table strings_;
  std::vector<std::unique_ptr<std::string>> string_cache_;
  Table type_blobs_;
  std::vector<std::unique_ptr<TypeNode>> types_;
  std::vector<std::uint64_t> decoded_types_;  // in the order decoded, to undo a failed trial
  std::vector<bool> types_in_progress_;
  int type_depth_ = 0;
  std::uint64_t entry_text_ = 0;  // characters of the entries' signature texts so far
  std::vector<std::pair<std::uint64_t, std::uint64_t>> constant_blobs_;
  std::uint64_t debug_functions_ = 0;
  BytecodeInfo info_;
};

BytecodeInfo ModuleReader::read() {
  if (size_ < 8 || std::memcmp(data_, F::kMagic, 8) != 0)
    error(0, "invalid magic number: input does not start with the Tile IR magic "
             "7f 54 69 6c 65 49 52 00");
  if (size_ < 12) error(size_, "malformed header: truncated input: header needs 12 bytes");
  const F::Version version{data_[8], data_[9]};
  if (version < F::kMinVersion || version > F::kMaxVersion)
    throw Error(Errc::unsupported_version,
                "unsupported Tile version " + version_text(version) + "." +
                    std::to_string(data_[10] | (data_[11] << 8)) +
                    ", this reader supports versions [" + version_text(F::kMinVersion) + " - " +
                    version_text(F::kMaxVersion) + "]",
                file_, 8);
  version_ = version;
  info_.version = Version{version.major, version.minor};
  const unsigned tag = data_[10] | (data_[11] << 8);
  if (tag & ~F::kPreviewTagBit) error(10, "header has unrecognized version tag bits 0x" + [&] {
    char buffer[8];
    std::snprintf(buffer, sizeof buffer, "%04x", tag);
    return std::string(buffer);
  }());
  if (tag & F::kPreviewTagBit) {
    if (version < F::kPreviewTag)
      error(10, "public-preview tag bit set in a " + version_text(version) +
                    " file; preview bytecode needs version " + version_text(F::kPreviewTag));
    info_.preview = true;
  }
  frame_sections();
  for (const auto& section : F::kSections) {
    if (section.mandatory && !sections_[section.id].present)
      error(size_, std::string(section.name) + " section is mandatory but missing");
  }

  strings_ = read_table(sections_[1], 4, "string table", Slicing::clamped);
  string_cache_.resize(strings_.size());
  const Section& producer = sections_[7];
  if (producer.present) {
    Cursor reader = cursor(producer.begin, producer.end);
    info_.producer = string(reader.varint("producer string index"), producer.begin);
    if (!reader.at_end())
      reader.error(std::to_string(reader.remaining()) + " unexpected bytes after the producer");
  }
  if (sections_[5].present)
    type_blobs_ = read_table(sections_[5], 4, "type table", Slicing::checked_on_use);
  types_.resize(type_blobs_.size());
  types_in_progress_.assign(type_blobs_.size(), false);
  if (sections_[4].present) {
    // NVIDIA checks the constant offsets up front, so disorder is an error in both modes.
    Table constants = read_table(sections_[4], 8, "constant table", Slicing::exact);
    for (std::uint64_t index = 0; index < constants.size(); ++index)
      constant_blobs_.push_back(entry(constants, index));
    for (const auto& blob : constant_blobs_) info_.undecoded.emplace_back(blob.first, blob.second);
  }
  if (sections_[3].present) read_debug(sections_[3]);
  if (sections_[6].present) info_.undecoded.emplace_back(sections_[6].begin, sections_[6].end);

  const Section& functions = sections_[2];
  Cursor reader = cursor(functions.begin, functions.end);
  const std::uint64_t count = reader.count("function count", 5);
  for (std::uint64_t index = 0; index < count; ++index) {
    info_.entries.push_back(read_function(reader));
    const Entry& entry = info_.entries.back();
    info_.undecoded.emplace_back(entry.body_begin, entry.body_end);
  }
  // Writers may pad the end of the function section; NVIDIA's reader ignores what follows.

  check_unused_types();
  return std::move(info_);
}

// Python decodes types lazily as ops use them. Not decoding bodies, this reader cannot tell which
// of the types the function table does not reach are used. In both modes it treats them as
// Python and NVIDIA treat a type no op uses: it tries each, and one that does not decode (e.g. an
// entry of a disordered table that leaves the data, or, strict, one with bytes left over) or
// decodes only with warnings is not reported but listed in `undecoded`, the warnings dropped; if
// a body uses it, the compiler meets it there as Python's reader does.
void ModuleReader::check_unused_types() {
  for (std::uint64_t index = 0; index < type_blobs_.size(); ++index) {
    if (types_[index]) continue;
    const std::uint64_t size = type_blobs_.data_size;
    const std::uint64_t begin = std::min(type_blobs_.offsets[index], size);
    const std::size_t warnings_before = info_.warnings.size();
    const std::size_t decoded_before = decoded_types_.size();
    bool failed = false;
    try {
      type(index, type_blobs_.data_begin + begin);
    } catch (const Error&) {
      failed = true;
      for (std::size_t undo = decoded_before; undo < decoded_types_.size(); ++undo)
        types_[decoded_types_[undo]].reset();
      decoded_types_.resize(decoded_before);
      types_in_progress_.assign(types_.size(), false);
      type_depth_ = 0;
    }
    if (!failed && info_.warnings.size() == warnings_before) continue;
    for (std::size_t undo = warnings_before; undo < info_.warnings.size(); ++undo)
      warned_.erase({info_.warnings[undo].message, info_.warnings[undo].offset});
    info_.warnings.resize(warnings_before);
    const std::uint64_t next = index + 1 < type_blobs_.size() ? type_blobs_.offsets[index + 1] : size;
    const std::uint64_t end = std::max(begin, std::min(next, size));
    info_.undecoded.emplace_back(type_blobs_.data_begin + begin, type_blobs_.data_begin + end);
    // A used entry whose slice leaves the data is refused at the table's data start (Python's offset).
    info_.undecoded.emplace_back(type_blobs_.data_begin, type_blobs_.data_begin);
  }
}

void ModuleReader::lenient(const std::string& message, std::uint64_t offset,
                           const std::string& action) {
  if (options_.strict) error(offset, message);
  if (warned_.insert({message, offset}).second)
    info_.warnings.push_back(DecodeWarning{message, offset, action});
}

void ModuleReader::frame_sections() {
  std::uint64_t pos = 12;
  while (true) {
    const std::uint64_t start = pos;
    if (start >= size_) error(start, "truncated input: missing end-of-bytecode section");
    const unsigned id_byte = data_[start];
    const unsigned id = id_byte & 0x7F;
    const bool aligned = id_byte & 0x80;
    if (id_byte == 0x80) error(start, "end section must not have the alignment flag set");
    if (id >= sizeof sections_ / sizeof sections_[0])
      error(start, "unknown section ID: " + std::to_string(id));
    pos = start + 1;
    if (id == 0) {
      if (pos != size_)
        error(pos, "end section is not the last section: " + std::to_string(size_ - pos) +
                       " bytes follow it");
      return;
    }
    Cursor header = cursor(pos, size_);
    const std::uint64_t length = header.varint("section length");
    std::uint64_t alignment = 1;
    if (aligned) {
      alignment = header.varint("section alignment");
      if (alignment == 0 || (alignment & (alignment - 1)))
        error(header.pos, "malformed section header: alignment " + std::to_string(alignment) +
                              " is not a power of two");
      const std::uint64_t pad = (alignment - header.pos % alignment) % alignment;
      if (pad > header.remaining())
        error(size_, "malformed section header: padding needs " + std::to_string(pad) +
                         " bytes, " + std::to_string(header.remaining()) + " remain");
      std::uint64_t bad = pad;  // the first padding byte other than 0xCB
      for (std::uint64_t index = 0; index < pad && bad == pad; ++index)
        if (data_[header.pos + index] != F::kPaddingByte) bad = index;
      const std::uint64_t padding_begin = header.pos;
      header.pos += pad;
      if (bad < pad) {
        const std::string message = "malformed section header: padding byte is 0x" +
                                    two_hex(data_[padding_begin + bad]) + ", expected 0xCB";
        if (options_.strict) error(header.pos, message);
        // Python reports it once the section is framed: a section cut short fails first.
        if (length <= header.remaining()) lenient(message, padding_begin + bad, kPaddingAction);
      }
    }
    if (length > header.remaining())
      error(size_, "malformed section header: payload needs " + std::to_string(length) +
                       " bytes, " + std::to_string(header.remaining()) + " remain");
    const F::SectionInfo& info = F::kSections[id];
    if (info.alignment && (!aligned || alignment % info.alignment))
      error(start, std::string(info.name) + " section must be aligned to a multiple of " +
                       std::to_string(info.alignment));
    if (sections_[id].present)
      lenient("duplicate " + std::string(info.name) + " section", start,
              "the last one is read, as tileirdisasm does");
    sections_[id] = Section{header.pos, header.pos + length, true};
    pos = header.pos + length;
  }
}

// count, 0xCB padding, `count` offsets of `width` bytes, then the entries' data.
Table ModuleReader::read_table(const Section& section, unsigned width, const std::string& what,
                               Slicing slicing) {
  Cursor reader = cursor(section.begin, section.end);
  const std::uint64_t count = reader.varint(what + " count");
  const std::uint64_t pad = (width - reader.pos % width) % width;
  if (pad > reader.remaining())
    error(section.end, "malformed " + what + ": padding needs " + std::to_string(pad) + " bytes");
  for (std::uint64_t index = 0; index < pad; ++index) {
    if (data_[reader.pos + index] != F::kPaddingByte) {
      const std::string message = "malformed " + what + ": padding byte is 0x" +
                                  two_hex(data_[reader.pos + index]) + ", expected 0xCB";
      if (options_.strict) error(reader.pos + pad, message);
      lenient(message, reader.pos + index, kPaddingAction);
      break;
    }
  }
  reader.pos += pad;
  if (count > reader.remaining() / width)
    error(section.end, "malformed " + what + ": " + std::to_string(count) + " offsets need more than the " +
                           std::to_string(reader.remaining()) + " bytes that remain");
  Table table;
  table.what = what;
  table.offsets.reserve(count);
  for (std::uint64_t index = 0; index < count; ++index) table.offsets.push_back(reader.fixed(width, what));
  table.data_begin = reader.pos;
  table.data_size = section.end - table.data_begin;
  std::uint64_t previous = 0;
  for (std::uint64_t index = 0; index < count; ++index) {
    const std::uint64_t start = table.offsets[index];
    const std::uint64_t stop = index + 1 < count ? table.offsets[index + 1] : table.data_size;
    if (!(previous <= start && start <= stop && stop <= table.data_size)) {
      const std::string message = what + " entry " + std::to_string(index) + " has offset " +
                                  std::to_string(start) + ", outside 0.." +
                                  std::to_string(table.data_size) + " or out of order";
      if (slicing == Slicing::exact) error(table.data_begin, message);
      lenient(message, table.data_begin,
              slicing == Slicing::clamped
                  ? "each entry runs to the next offset, or to the end of the data when that is "
                    "smaller or past the end (tileirdisasm's slicing)"
                  : "each entry runs to the next offset and is refused only if used while outside "
                    "the data or reversed (as tileirdisasm reads it)");
      table.slicing = slicing;
      // Entries may now overlap: bound the bytes read, so n entries of n bytes cannot be copied.
      table.budget = table.data_size + options_.max_overlap_bytes;
      break;
    }
    previous = start;
  }
  return table;
}

std::pair<std::uint64_t, std::uint64_t> ModuleReader::entry(Table& table, std::uint64_t index) {
  const std::uint64_t size = table.data_size;
  std::uint64_t start = table.offsets[index];
  std::uint64_t stop = index + 1 < table.size() ? table.offsets[index + 1] : size;
  if (table.slicing != Slicing::exact) {
    if (table.slicing == Slicing::clamped) {
      if (stop < start) stop = size;  // then past the end reads to the end; a start past it: empty
      stop = std::min(stop, size);
      start = std::min(start, stop);
    } else if (!(start <= stop && stop <= size)) {
      error(table.data_begin, table.what + " entry " + std::to_string(index) + " has offset " +
                                  std::to_string(start) + ", outside 0.." + std::to_string(size) +
                                  " or out of order");
    }
    if (stop - start > table.budget)
      error(table.data_begin, "limit exceeded: the entries read from the " + table.what +
                                  ", whose offsets are out of order, overlap by more than "
                                  "max_overlap_bytes=" + std::to_string(options_.max_overlap_bytes));
    table.budget -= stop - start;
  }
  return {table.data_begin + start, table.data_begin + stop};
}

const std::string& ModuleReader::string(std::uint64_t index, std::uint64_t offset) {
  if (index >= strings_.size())
    error(offset, "string index " + std::to_string(index) + " out of range (table has " +
                      std::to_string(strings_.size()) + ")");
  auto& cached = string_cache_[index];
  if (!cached) {
    // Strings are raw bytes, as NVIDIA's reader keeps them (not necessarily UTF-8).
    const auto blob = entry(strings_, index);
    cached = std::make_unique<std::string>(reinterpret_cast<const char*>(data_ + blob.first),
                                           blob.second - blob.first);
  }
  return *cached;
}

// ---- types -------------------------------------------------------------------------------------

const TypeNode& ModuleReader::type(std::uint64_t index, std::uint64_t offset) {
  if (index >= type_blobs_.size())
    error(offset, "type index " + std::to_string(index) + " out of range (table has " +
                      std::to_string(type_blobs_.size()) + ")");
  if (types_[index]) return *types_[index];
  if (types_in_progress_[index]) error(offset, "type " + std::to_string(index) + " refers to itself");
  // Python's reader turns deep recursion into "nesting too deep"; here the depth is bounded.
  if (type_depth_ >= F::kMaxNesting) error(offset, "types nested too deeply");
  types_in_progress_[index] = true;
  ++type_depth_;
  auto node = std::make_unique<TypeNode>();
  const auto blob = entry(type_blobs_, index);
  Cursor reader = cursor(blob.first, blob.second);
  decode_type(reader, *node);
  if (node->kind != Kind::function)
    node->text_size = node->text.size() + (node->view ? node->view->text.size() + node->suffix.size() : 0);
  if (!reader.at_end())
    lenient(std::to_string(reader.remaining()) + " unexpected bytes after type " +
                std::to_string(index),
            reader.pos, kLeftoverAction);
  --type_depth_;
  types_in_progress_[index] = false;
  types_[index] = std::move(node);
  decoded_types_.push_back(index);
  return *types_[index];
}

const TypeNode& ModuleReader::type_ref(Cursor& reader, const std::string& what) {
  const std::uint64_t offset = reader.pos;
  return type(reader.varint(what), offset);
}

const TypeNode& ModuleReader::element(Cursor& reader, const std::string& what, bool allow_pointer) {
  const std::uint64_t offset = reader.pos;
  const TypeNode& result = type_ref(reader, what);
  if (result.kind == Kind::element || (allow_pointer && result.kind == Kind::pointer)) return result;
  error(offset, what + " must be an element type" + (allow_pointer ? " or pointer" : "") + ", got " +
                    brief_text(result));
}

const TypeNode& ModuleReader::tensor_view(Cursor& reader) {
  const std::uint64_t offset = reader.pos;
  const TypeNode& result = type_ref(reader, "tensor_view type");
  if (result.kind != Kind::tensor_view) error(offset, "expected a tensor_view type, got " + brief_text(result));
  return result;
}

std::uint64_t ModuleReader::enumeration(Cursor& reader, const F::EnumInfo* members,
                                        std::size_t count, const char* enum_name,
                                        const std::string& what) {
  const std::uint64_t offset = reader.pos;
  const std::uint64_t value = reader.varint(what);
  for (std::size_t index = 0; index < count; ++index) {
    if (members[index].value != value) continue;
    if (members[index].since > version_)
      error(offset, "enum value " + std::to_string(value) + " of " + enum_name +
                        " is not available in bytecode version " + version_text(version_) +
                        " (needs " + version_text(members[index].since) + ")");
    return value;
  }
  error(offset, "invalid " + what + " value " + std::to_string(value));
}

const char* keyword(const F::EnumInfo* members, std::size_t count, std::uint64_t value) {
  for (std::size_t index = 0; index < count; ++index)
    if (members[index].value == value) return members[index].keyword;
  return "?";
}

void ModuleReader::check_flags(std::uint64_t flags, std::uint64_t known, const std::string& what,
                               std::uint64_t offset) const {
  if (flags & ~known) error(offset, what + " has unknown optional-parameter flags 0x" + hex(flags));
}

constexpr std::size_t kPtrAttrs = sizeof F::kPtrAttr / sizeof F::kPtrAttr[0];
constexpr std::size_t kPaddings = sizeof F::kPaddingValue / sizeof F::kPaddingValue[0];

std::string padding_text(std::int64_t padding) {
  if (padding < 0) return "";
  return std::string(", padding_value = ") +
         keyword(F::kPaddingValue, kPaddings, static_cast<std::uint64_t>(padding));
}

std::string dim_map_text(const std::vector<std::int64_t>& dim_map) {
  for (std::size_t index = 0; index < dim_map.size(); ++index)
    if (dim_map[index] != static_cast<std::int64_t>(index))
      return ", dim_map=" + list_text(dim_map);
  return "";
}

// The name NVIDIA's bytecode reader gives an element type in its errors (Float4E2M1FN, Int4).
static std::string class_name(const F::ElementInfo& info) {
  const std::string name = info.name;
  if (!info.is_float) return "Int" + std::to_string(info.bits);
  if (name.size() > 1 && name[0] == 'f' && name[1] >= '0' && name[1] <= '9')
    return "Float" + name.substr(1);
  return name;
}

void ModuleReader::decode_type(Cursor& reader, TypeNode& node) {
  const std::uint64_t tag_offset = reader.pos;
  const std::uint64_t tag = reader.varint("type tag");
  for (const auto& info : F::kElements) {
    if (info.tag != tag) continue;
    if (info.since > version_)
      error(tag_offset, std::string("type '") + class_name(info) + "' requires bytecode version " +
                            version_text(info.since) + "+, file version is " + version_text(version_));
    node.kind = Kind::element;
    node.element = &info;
    node.text = info.name;
    return;
  }
  const F::CompositeInfo* composite = nullptr;
  for (const auto& info : F::kComposites)
    if (info.tag == tag) composite = &info;
  if (!composite) error(tag_offset, "unknown type tag " + std::to_string(tag));
  if (composite->since > version_)
    error(tag_offset, "type tag " + std::to_string(tag) + " requires bytecode version " +
                          version_text(composite->since) + "+, file version is " +
                          version_text(version_));
  const bool pointer_attr = version_ >= F::kPointerAttr;
  std::int64_t padding = -1;
  switch (tag) {
    case F::kTagToken:
      node.kind = Kind::token;
      node.text = "token";
      return;
    case F::kTagPointer: {
      const std::uint64_t flags = pointer_attr ? reader.varint("pointer flags") : 0;
      const TypeNode& pointee = element(reader, "pointee type");
      std::uint64_t ptr_attr = 0;
      if (flags & 1) ptr_attr = enumeration(reader, F::kPtrAttr, kPtrAttrs, "PtrAttr", "ptr_attr");
      check_flags(flags, 1, "pointer", tag_offset);
      node.kind = Kind::pointer;
      node.element = pointee.element;
      node.text = "ptr<" + pointee.text;
      if (ptr_attr) node.text += std::string(", <") + keyword(F::kPtrAttr, kPtrAttrs, ptr_attr) + ">";
      node.text += ">";
      return;
    }
    case F::kTagTile: {
      const TypeNode& item = element(reader, "tile element type", true);
      node.shape = reader.int_array(8, "tile shape");
      for (std::int64_t dim : node.shape)
        if (dim <= 0)
          error(tag_offset, "tile shape " + list_text(node.shape) + " has a non-positive dimension");
      // The product is never formed past the limit, so a hostile shape cannot overflow it.
      std::uint64_t elements = 1;
      for (std::int64_t dim : node.shape) {
        if (static_cast<std::uint64_t>(dim) > options_.max_tile_elements / elements)
          error(tag_offset, "limit exceeded: tile shape " + list_text(node.shape) +
                                " has more than max_tile_elements=" +
                                std::to_string(options_.max_tile_elements) + " elements");
        elements *= static_cast<std::uint64_t>(dim);
      }
      node.kind = Kind::tile;
      node.tile_element = &item;
      node.text = "tile<";
      for (std::int64_t dim : node.shape) node.text += std::to_string(dim) + "x";
      node.text += item.text + ">";
      return;
    }
    case F::kTagTensorView: {
      const std::uint64_t flags = pointer_attr ? reader.varint("tensor_view flags") : 0;
      const TypeNode& item = element(reader, "tensor_view element type");
      const auto shape = reader.int_array(8, "tensor_view shape");
      const auto strides = reader.int_array(8, "tensor_view strides");
      if (shape.size() != strides.size())
        error(tag_offset, "tensor_view has " + std::to_string(shape.size()) + " dims but " +
                              std::to_string(strides.size()) + " strides");
      std::uint64_t ptr_attr = 0;
      if (flags & 1) ptr_attr = enumeration(reader, F::kPtrAttr, kPtrAttrs, "PtrAttr", "ptr_attr");
      check_flags(flags, 1, "tensor_view", tag_offset);
      node.kind = Kind::tensor_view;
      node.text = "tensor_view<";
      for (std::int64_t dim : shape) node.text += (dim == kDynamic ? "?" : std::to_string(dim)) + "x";
      node.text += item.text + ", strides=[" + dims_text(strides, ",") + "]";
      if (ptr_attr)
        node.text += std::string(", #cuda_tile.ptr_attr<") + keyword(F::kPtrAttr, kPtrAttrs, ptr_attr) + ">";
      node.text += ">";
      return;
    }
    case F::kTagPartitionView: {
      const bool unified = version_ >= F::kUnifiedOptionalBitfield;
      std::uint64_t flags = unified ? reader.varint("partition_view flags") : 0;
      const auto tile_shape = reader.int_array(4, "partition_view tile shape");
      const TypeNode& view = tensor_view(reader);
      const auto dim_map = reader.int_array(4, "partition_view dim_map");
      if (!unified) {
        const std::uint64_t presence_offset = reader.pos;
        flags = reader.u8("partition_view padding presence byte");
        if (flags > 1) {  // before 13.3 a bool byte, which NVIDIA takes as true when non-zero
          lenient("partition_view has unknown optional-parameter flags 0x" + hex(flags),
                  presence_offset, "the padding presence byte is read as true, as tileirdisasm "
                  "takes any non-zero byte");
          flags = 1;
        }
      }
      if (flags & 1)
        padding = static_cast<std::int64_t>(
            enumeration(reader, F::kPaddingValue, kPaddings, "PaddingValue", "padding_value"));
      check_flags(flags, 1, "partition_view", tag_offset);
      node.kind = Kind::partition_view;
      node.text = "partition_view<tile=(" + dims_text(tile_shape, "x") + ")" + padding_text(padding) + ", ";
      node.suffix = dim_map_text(dim_map) + ">";
      node.view = &view;
      return;
    }
    case F::kTagGatherScatterView: {
      const std::uint64_t flags = reader.varint("gather_scatter_view flags");
      const auto tile_shape = reader.int_array(4, "gather_scatter_view tile shape");
      const TypeNode& view = tensor_view(reader);
      const std::uint64_t sparse_dim = reader.varint("sparse_dim");
      if (flags & 1)
        padding = static_cast<std::int64_t>(
            enumeration(reader, F::kPaddingValue, kPaddings, "PaddingValue", "padding_value"));
      check_flags(flags, 1, "gather_scatter_view", tag_offset);
      node.kind = Kind::gather_scatter_view;
      node.text = "gather_scatter_view<tile=(" + dims_text(tile_shape, "x") + ")" +
                  padding_text(padding) + ", ";
      node.suffix = ", sparse_dim=" + std::to_string(sparse_dim) + ">";
      node.view = &view;
      return;
    }
    case F::kTagStridedView: {
      const std::uint64_t flags = reader.varint("strided_view flags");
      const auto tile_shape = reader.int_array(4, "strided_view tile shape");
      const auto strides = reader.int_array(4, "strided_view traversal strides");
      const TypeNode& view = tensor_view(reader);
      const auto dim_map = reader.int_array(4, "strided_view dim_map");
      if (flags & 1)
        padding = static_cast<std::int64_t>(
            enumeration(reader, F::kPaddingValue, kPaddings, "PaddingValue", "padding_value"));
      check_flags(flags, 1, "strided_view", tag_offset);
      node.kind = Kind::strided_view;
      node.text = "strided_view<tile=(" + dims_text(tile_shape, "x") + "), traversal_strides=[" +
                  dims_text(strides, ",") + "]" + padding_text(padding) + ", ";
      node.suffix = dim_map_text(dim_map) + ">";
      node.view = &view;
      return;
    }
    default: {  // function
      const std::uint64_t num_inputs = reader.count("function input count");
      for (std::uint64_t index = 0; index < num_inputs; ++index)
        node.inputs.push_back(&type_ref(reader, "function input type"));
      const std::uint64_t num_results = reader.count("function result count");
      for (std::uint64_t index = 0; index < num_results; ++index)
        node.results.push_back(&type_ref(reader, "function result type"));
      node.kind = Kind::function;
      // "(" inputs ") -> (" results ")"; each part is at most kMaxTypeText, so no overflow.
      std::uint64_t size = 8;
      for (const auto* parts : {&node.inputs, &node.results}) {
        for (const TypeNode* part : *parts) size += part->text_size;
        if (!parts->empty()) size += 2 * (parts->size() - 1);
      }
      if (size > F::kMaxTypeText)
        error(tag_offset, "limit exceeded: function type text would be " + std::to_string(size) +
                              " characters, more than max_type_text=" + std::to_string(F::kMaxTypeText));
      node.text_size = size;
      return;
    }
  }
}

// ---- constants and attributes ------------------------------------------------------------------

void ModuleReader::dense(const TypeNode& tile_type, std::uint64_t index, std::uint64_t offset) {
  if (tile_type.kind != Kind::tile)
    error(offset, "dense constant needs a tile type, got " + brief_text(tile_type));
  if (index >= constant_blobs_.size())
    error(offset, "constant index " + std::to_string(index) + " out of range (pool has " +
                      std::to_string(constant_blobs_.size()) + ")");
  const auto& blob = constant_blobs_[index];
  Cursor reader = cursor(blob.first, blob.second);
  const std::uint64_t length = reader.count("constant byte length");
  reader.need(length, "constant bytes");
  reader.pos += length;
  const std::uint64_t payload = reader.pos - length;
  if (!reader.at_end())
    lenient(std::to_string(reader.remaining()) + " unexpected bytes after constant " +
                std::to_string(index),
            reader.pos, kLeftoverAction);
  // A dense buffer holds either one element (a splat) or all of them; i1 is bit-packed.
  // Sizes saturate at 2^64-1, which no real buffer length can equal.
  constexpr std::uint64_t kMax = ~std::uint64_t(0);
  auto times = [](std::uint64_t a, std::uint64_t b) { return b && a > kMax / b ? kMax : a * b; };
  std::uint64_t elements = 1;
  for (std::int64_t dim : tile_type.shape) elements = times(elements, static_cast<std::uint64_t>(dim));
  const TypeNode& item = *tile_type.tile_element;
  std::uint64_t splat, full;
  if (item.kind == Kind::element && std::strcmp(item.element->name, "i1") == 0) {
    splat = 1;
    full = elements == kMax ? kMax : (elements + 7) / 8;
  } else {
    const unsigned width = item.kind == Kind::pointer ? 8 : (item.element->bits + 7) / 8;
    splat = width;
    full = times(elements, width);
  }
  if (length != splat && length != full)
    error(offset, "constant " + std::to_string(index) + " has " + std::to_string(length) +
                      " bytes, which is neither a splat nor a full buffer for " + tile_type.text);
  // MLIR's one-byte i1 splat is 0x00 or 0xFF; a bit-packed buffer of more than 8 elements is longer.
  if (item.kind == Kind::element && std::strcmp(item.element->name, "i1") == 0 && elements != 1 &&
      length == 1 && length < full && data_[payload] != 0x00 && data_[payload] != 0xFF)
    lenient("constant " + std::to_string(index) + " is a one-byte i1 splat of 0x" +
                two_hex(data_[payload]) + ", expected 0x00 or 0xFF",
            offset, "read as a splat of true (0xFF), as tileirdisasm takes any non-zero byte");
}

std::int64_t ModuleReader::int_value(Cursor& reader, unsigned width, const std::string& what) {
  const std::uint64_t offset = reader.pos;
  const std::uint64_t raw = reader.varint(what);
  if (width < 64 && (raw >> width))
    error(offset, what + " value " + std::to_string(raw) + " does not fit in " +
                      std::to_string(width) + " bits");
  return static_cast<std::int64_t>(raw);
}

bool ModuleReader::boolean(Cursor& reader, const std::string& what) {
  const std::uint64_t offset = reader.pos;
  const unsigned value = reader.u8(what);
  if (value > 1) lenient(what + " byte is " + std::to_string(value) + ", expected 0 or 1", offset, kTrueAction);
  return value != 0;
}

AttrKind ModuleReader::tagged_attr(Cursor& reader, int depth) {
  if (depth > F::kMaxNesting) reader.error("attributes nested too deeply");
  const std::uint64_t offset = reader.pos;
  const std::uint64_t tag = reader.varint("attribute tag");
  switch (tag) {
    case F::kAttrInteger: {
      const std::uint64_t type_offset = reader.pos;
      const TypeNode& item = element(reader, "integer attribute type");
      if (item.element->is_float)
        error(type_offset, "integer attribute type must be an integer type, got " + item.text);
      int_value(reader, item.element->bits, "integer attribute");
      return AttrKind::other;
    }
    case F::kAttrFloat: {
      const std::uint64_t type_offset = reader.pos;
      const TypeNode& item = element(reader, "float attribute type");
      if (!item.element->is_float)
        error(type_offset, "float attribute type must be a float type, got " + item.text);
      if (item.element->bits <= 8) {
        reader.u8("float attribute byte");
      } else {
        const auto bits = static_cast<std::uint64_t>(reader.zigzag("float attribute bits"));
        if (item.element->bits < 64 && (bits >> item.element->bits))
          error(offset, "float attribute bits 0x" + hex(bits) + " do not fit " + item.text);
      }
      return AttrKind::other;
    }
    case F::kAttrBool:
      boolean(reader, "bool attribute");
      return AttrKind::other;
    case F::kAttrType:
      type_ref(reader, "type attribute");
      return AttrKind::other;
    case F::kAttrString:
      string(reader.varint("string index"), offset);
      return AttrKind::other;
    case F::kAttrArray: {
      const std::uint64_t count = reader.count("array attribute length");
      for (std::uint64_t index = 0; index < count; ++index) tagged_attr(reader, depth + 1);
      return AttrKind::array;
    }
    case F::kAttrDense: {
      const std::uint64_t type_offset = reader.pos;
      const TypeNode& tile_type = type_ref(reader, "dense attribute type");
      dense(tile_type, reader.varint("constant index"), type_offset);
      return AttrKind::other;
    }
    case F::kAttrDivBy: {
      reader.varint("div_by divisor");
      const std::uint64_t flags = reader.varint("div_by flags");  // a varint, as NVIDIA reads it
      if (flags & ~3u) error(offset, "div_by has unknown flags 0x" + hex(flags));
      if (flags & 1) reader.zigzag("div_by every");
      if (flags & 2) reader.zigzag("div_by along");
      return AttrKind::other;
    }
    case F::kAttrSameElements:
      reader.int_array(8, "same_elements values");
      return AttrKind::other;
    case F::kAttrDictionary:
      dictionary_body(reader, depth, false);
      return AttrKind::dictionary;
    case F::kAttrHints:
      dictionary_body(reader, depth, true);
      return AttrKind::hints;
    case F::kAttrBounded: {
      const std::uint64_t flags = reader.varint("bounded flags");  // a varint, as NVIDIA reads it
      if (flags & ~3u) error(offset, "bounded has unknown flags 0x" + hex(flags));
      if (flags & 1) reader.zigzag("bounded lower bound");
      if (flags & 2) reader.zigzag("bounded upper bound");
      return AttrKind::other;
    }
    default:
      error(offset, "unknown attribute tag " + std::to_string(tag));
  }
}

void ModuleReader::dictionary_body(Cursor& reader, int depth, bool hints) {
  const std::uint64_t count = reader.count("dictionary length", 2);
  std::vector<std::string> keys;  // compared by text: a writer need not intern equal strings
  for (std::uint64_t index = 0; index < count; ++index) {
    const std::uint64_t offset = reader.pos;
    const std::string& key = string(reader.varint("dictionary key"), offset);
    if (key.empty())
      error(offset, "invalid empty attribute name for DictionaryAttr element " + std::to_string(index));
    if (std::find(keys.begin(), keys.end(), key) != keys.end())
      error(offset, "duplicate dictionary key " + quoted(key));
    keys.push_back(key);
    const AttrKind kind = tagged_attr(reader, depth + 1);
    if (hints && kind != AttrKind::dictionary)
      reader.error("optimization hints for " + quoted(key) + " must be a dictionary");
  }
}

// ---- debug framing -----------------------------------------------------------------------------

void ModuleReader::read_debug(const Section& section) {
  Cursor reader = cursor(section.begin, section.end);
  const auto padding = [this](const std::string& message, std::uint64_t offset) {
    lenient(message, offset, kPaddingAction);
  };
  const std::uint64_t num_functions = reader.count("debug function count", 4);
  reader.align(4, "debug function offsets", padding);
  std::vector<std::uint64_t> firsts;
  firsts.reserve(num_functions);
  for (std::uint64_t index = 0; index < num_functions; ++index)
    firsts.push_back(reader.fixed(4, "debug function offset"));
  const std::uint64_t num_indices = reader.count("debug index count", 8);
  reader.align(8, "debug indices", padding);
  reader.need(8 * num_indices, "debug indices");
  info_.undecoded.emplace_back(reader.pos, reader.pos + 8 * num_indices);
  reader.pos += 8 * num_indices;
  const std::uint64_t num_attrs = reader.count("debug attribute count", 4);
  reader.align(4, "debug attribute offsets", padding);
  if (num_attrs == 0 && reader.at_end())
    // NVIDIA's reader takes a pointer to the offset table even when it is empty, and that fails
    // at the section's end ("failed to read debug info offset pointer").
    reader.error("debug section ends at its empty attribute table: at least one byte must follow "
                 "the attribute count and its padding");
  std::vector<std::uint64_t> offsets;
  offsets.reserve(num_attrs);
  for (std::uint64_t index = 0; index < num_attrs; ++index)
    offsets.push_back(reader.fixed(4, "debug attribute offset"));
  const std::uint64_t data_begin = reader.pos;
  const std::uint64_t data_size = section.end - data_begin;
  std::uint64_t previous = 0;
  for (std::uint64_t index = 0; index < num_attrs; ++index) {
    const std::uint64_t start = offsets[index];
    const std::uint64_t stop = index + 1 < num_attrs ? offsets[index + 1] : data_size;
    if (!(previous <= start && start <= stop && stop <= data_size)) {
      // Attributes are decoded (and a used entry outside the data refused) with the bodies.
      lenient("debug attribute table entry " + std::to_string(index) + " has offset " +
                  std::to_string(start) + ", outside 0.." + std::to_string(data_size) +
                  " or out of order",
              data_begin, "each entry runs to the next offset and is refused only if used while "
                          "outside the data or reversed (as tileirdisasm reads it)");
      break;
    }
    previous = start;
  }
  info_.undecoded.emplace_back(data_begin, section.end);
  for (std::uint64_t position = 0; position < num_functions; ++position) {
    const std::uint64_t first = firsts[position];
    const std::uint64_t stop = position + 1 < num_functions ? firsts[position + 1] : num_indices;
    // tileirdisasm reads a function's locations from its first index on, as many as it needs;
    // that past the index table fails is found when the locations are decoded, with the body.
    if (!(first <= stop && stop <= num_indices))
      lenient("debug function " + std::to_string(position) + " index range " +
                  std::to_string(first) + ".." + std::to_string(stop) + " is outside 0.." +
                  std::to_string(num_indices),
              section.begin, "its locations are read from index " + std::to_string(first) +
                                 " on, as tileirdisasm reads them");
  }
  debug_functions_ = num_functions;
}

// ---- functions ---------------------------------------------------------------------------------

Param ModuleReader::describe_param(const TypeNode& type) const {
  Param param;
  param.type = type_text(type);
  // Kernels take rank-0 tiles: a pointer (8 bytes) or a scalar in its natural width, as
  // tileiras lays out .param space (i1 and 8-bit types take one byte).
  if (type.kind != Kind::tile || !type.shape.empty()) return param;
  const TypeNode& item = *type.tile_element;
  param.element = item.element->name;
  if (item.kind == Kind::pointer) {
    param.kind = ParamKind::pointer;
    param.bits = 64;
    param.size = 8;
    return param;
  }
  param.bits = item.element->bits;
  param.kind = item.element->is_float ? ParamKind::floating : ParamKind::integer;
  param.size = param.bits <= 8 ? 1 : param.bits <= 16 ? 2 : param.bits <= 32 ? 4 : 8;
  return param;
}

Entry ModuleReader::read_function(Cursor& reader) {
  Entry entry;
  entry.offset = reader.pos;
  entry.name = string(reader.varint("function name"), entry.offset);
  const std::uint64_t signature_offset = reader.pos;
  const TypeNode& signature = type_ref(reader, "function signature");
  if (signature.kind != Kind::function)
    error(signature_offset, "function signature must be a function type, got " + brief_text(signature));
  const std::uint64_t flags_offset = reader.pos;
  unsigned flags = reader.u8("function flags");
  if (!(flags & F::kFunctionFlagKernel))
    error(flags_offset, "function " + quoted(entry.name) + " is not marked as a kernel entry (flags 0x" +
                            (flags < 16 ? "0" : "") + hex(flags) + ")");
  if (flags & ~(F::kFunctionFlagKernel | F::kFunctionFlagHints)) {
    const std::string message = "function " + quoted(entry.name) + " has unknown flags 0x" +
                                two_hex(flags);
    // NVIDIA refuses them from 13.4 ("unrecognized flag bits"), and reads bit 0 in every version
    // as private visibility, which an entry cannot have.
    if (version_ >= F::kUnknownFunctionFlagsRefused || (flags & F::kFunctionFlagPrivate))
      error(flags_offset, message);
    lenient(message, flags_offset, "the unknown bits are ignored, as tileirdisasm ignores them "
                                   "before 13.4");
    flags &= F::kFunctionFlagKernel | F::kFunctionFlagHints;
  }
  // From 13.5 hints always follow and bit 2 marks an extern implementation, which a kernel is not.
  if (version_ >= F::kEntryArgAttrs && (flags & F::kFunctionFlagHints))
    error(flags_offset, "function " + quoted(entry.name) + " has flags 0x" + (flags < 16 ? "0" : "") +
                            hex(flags) + ": from 13.5 bit 0x04 marks an extern implementation, which a "
                            "kernel entry cannot be");
  const std::uint64_t loc_offset = reader.pos;
  const std::uint64_t loc_index = reader.varint("function location");
  if (version_ >= F::kEntryArgAttrs || (flags & F::kFunctionFlagHints)) {
    const std::uint64_t hints_offset = reader.pos;
    if (tagged_attr(reader) != AttrKind::hints)
      error(hints_offset, "function hints must be an optimization_hints attribute");
  }
  if (version_ >= F::kEntryArgAttrs) {
    const std::uint64_t attrs_offset = reader.pos;
    if (tagged_attr(reader) != AttrKind::array)
      error(attrs_offset, "function argument attributes must be an array");
  }
  // checked after the hints, as NVIDIA's reader reports a bad hint dictionary first
  if (entry.name.empty()) error(entry.offset, "function name is empty");
  const std::uint64_t body_length = reader.varint("function body length");
  const Cursor body = reader.sub(body_length, "function body");
  entry.body_begin = body.pos;
  entry.body_end = body.end;
  if (loc_index > debug_functions_)
    error(loc_offset, "failed to read function location: debug function index " +
                          std::to_string(loc_index) + " out of range (" +
                          std::to_string(debug_functions_) + ")");
  // Entries may share one signature type: their texts count against one budget together
  // (the signature's text, and as much again for its parameters and results).
  entry_text_ += 2 * signature.text_size;
  if (entry_text_ > kMaxEntryText)
    error(signature_offset, "limit exceeded: entry signatures up to " + quoted(entry.name) +
                                " spell out more than " + std::to_string(kMaxEntryText) +
                                " characters of type text");
  entry.signature = type_text(signature);
  for (const TypeNode* input : signature.inputs) entry.params.push_back(describe_param(*input));
  for (const TypeNode* result : signature.results) entry.results.push_back(type_text(*result));
  return entry;
}

}  // namespace

const char* to_string(ParamKind kind) noexcept {
  switch (kind) {
    case ParamKind::pointer: return "pointer";
    case ParamKind::integer: return "integer";
    case ParamKind::floating: return "float";
    case ParamKind::unsupported: return "unsupported";
  }
  return "unsupported";
}

const Entry* BytecodeInfo::find(const std::string& name) const {
  for (const Entry& entry : entries)
    if (entry.name == name) return &entry;
  return nullptr;
}

BytecodeInfo read_bytecode(const std::uint8_t* data, std::size_t size, const std::string& file,
                           const ReadOptions& options) {
  try {
    return ModuleReader(data, size, file, options).read();
  } catch (const std::bad_alloc&) {
    // Every count is checked against the bytes left and shared types are never unfolded, so
    // this is unreachable with sane input sizes; still, never let it escape as a crash.
    throw Error(Errc::malformed, "limit exceeded: out of memory while reading the bytecode", file, 0);
  }
}

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream)
    throw Error(Errc::io, std::string("cannot read file: ") + std::strerror(errno), path);
  // Whole blocks, not a byte-at-a-time iterator (a fifth of `tilebc-inspect list` under ASan).
  std::vector<std::uint8_t> bytes;
  char block[1 << 16];
  while (stream.read(block, sizeof block) || stream.gcount() > 0)
    bytes.insert(bytes.end(), block, block + stream.gcount());
  if (stream.bad()) throw Error(Errc::io, "cannot read file: read failed", path);
  return bytes;
}

}  // namespace tilebc
