// tilebc C++ host loader: load Tile IR bytecode (or an AOT fatbin), list its entries, launch them.
//
//   auto module = tilebc::Module::load("kernels.tilebc");
//   for (const auto& entry : module.entries()) std::cout << entry.name << entry.signature << "\n";
//   auto vadd = module.function("vadd");
//   vadd.launch({blocks}, a, b, c, n, tilebc::Stream{stream});   // checked against the signature
//
// The CUDA driver (libcuda.so.1, or $TILEBC_LIBCUDA) is opened with dlopen at the first launch,
// so this library builds, links and reads modules on machines without a driver. A cubin for the
// device comes from, in order: the module's fatbin (AOT), the shared cache (runtime/CACHE.md), or
// the Python runtime (`tilebc compile`), whose result is loaded directly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tilebc/bytecode.hpp"
#include "tilebc/cache.hpp"
#include "tilebc/error.hpp"
#include "tilebc/fatbin.hpp"

namespace tilebc {

/// Grid dimensions in blocks (one tile block is one CTA).
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  Dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

/// A CUDA stream (a CUstream cast to void*); the default stream when null.
struct Stream {
  void* handle = nullptr;
};

/// Half-precision scalars by their bit pattern (C++17 has no standard 16-bit float).
struct F16 { std::uint16_t bits; };
struct BF16 { std::uint16_t bits; };
/// A device address held as an integer (CUdeviceptr); `element` names the pointee if known.
struct DevicePtr {
  std::uint64_t address;
  const char* element = nullptr;
};

/// One launch argument after conversion from a C++ value.
struct Arg {
  ParamKind kind = ParamKind::unsupported;
  unsigned bits = 0;          ///< scalar width (pointers: 64)
  std::string element;        ///< Tile IR element name when known ("f32"); "" for void* / untyped
  std::string description;    ///< the C++ type, for messages ("int64_t", "float*")
  std::uint64_t storage = 0;  ///< the value's bytes, little-endian

  Arg() = default;
  template <class T, class = std::enable_if_t<!std::is_same<std::decay_t<T>, Arg>::value>>
  Arg(T value) { *this = from(value); }  // NOLINT: implicit on purpose, for launch(...)

 private:
  template <class T>
  static Arg from(T value);
  static Arg make(ParamKind kind, unsigned bits, const char* element, const char* description,
                  const void* bytes, unsigned size);
};

/// Check `args` against `entry`'s parameters: count, kind (pointer / integer / float), scalar
/// width and, where the C++ type says it, the element type. Throws Errc::argument_mismatch.
void check_arguments(const Entry& entry, const std::vector<Arg>& args);

/// Where to find code and how to build it on a cache miss.
struct Options {
  /// Cache root; empty: default_cache_root() ($TILEBC_CACHE_DIR, ...). Either way it is read only
  /// when cache_trust_problem() finds nothing (runtime/CACHE.md, "Trust"); otherwise there is no
  /// cache, and a miss compiles with TILEBC_CACHE_DIR=off.
  std::string cache_dir;
  std::string arch;        ///< target override ("sm_90"); empty: the current device's
  std::string compiler;    ///< command for `compile`; empty: $TILEBC_COMPILER, `tilebc` on PATH, or
                           ///< `$TILEBC_PYTHON -m tilebc_runtime.cli`
  bool allow_compile = true;
  /// Refuse the deviations NVIDIA's reader accepts (ReadOptions::strict) instead of reading them
  /// as it does and listing them in Module::warnings().
  bool strict = false;
};

/// A cubin (or fatbin) ready for the driver, and how to launch its kernels.
struct Image {
  enum class Source { fatbin, cache, compiled } source = Source::cache;
  std::string arch;
  std::vector<std::uint8_t> bytes;
  unsigned threads_per_cta = 0;  ///< 0: ask the driver (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
  unsigned dynamic_shared_bytes = 0;
  /// TMA kernels (the JIT's sm_90 default): the tensor maps each launch encodes from its arguments
  /// and passes after the kernel's own parameters.
  std::vector<TensorMapRecord> tensor_maps;
  std::string detail;            ///< cache key, compile command, or fatbin path
};

struct ModuleState;

/// One entry of a loaded module. Cheap to copy; keeps its module alive.
class Function {
 public:
  const Entry& entry() const;
  const std::string& name() const { return entry().name; }

  /// The code this entry would run on `arch` (default: Options::arch, else the current device).
  Image image(const std::string& arch = {}) const;

  /// Launch with arguments converted from C++ values; an optional trailing tilebc::Stream.
  template <class... A>
  void launch(Dim3 grid, A&&... args) const {
    std::vector<Arg> packed;
    Stream stream;
    bool stream_seen = false;
    (collect(packed, stream, stream_seen, std::forward<A>(args)), ...);
    launch_args(grid, packed, stream);
  }

  /// Check, then launch. Mismatches throw before the driver is touched.
  void launch_args(Dim3 grid, const std::vector<Arg>& args, Stream stream = {}) const;

 private:
  friend class Module;
  Function(std::shared_ptr<ModuleState> state, std::size_t index) : state_(std::move(state)), index_(index) {}
  static void collect(std::vector<Arg>&, Stream& stream, bool& seen, Stream value) {
    stream = value;
    seen = true;
  }
  template <class T>
  static void collect(std::vector<Arg>& packed, Stream&, bool& seen, T&& value) {
    if (seen) throw Error(Errc::argument_mismatch, "the stream must be the last launch argument");
    packed.emplace_back(Arg(std::forward<T>(value)));
  }
  std::shared_ptr<ModuleState> state_;
  std::size_t index_;
};

/// A bytecode module or an AOT fatbin with its metadata.
class Module {
 public:
  /// Load a file: Tile IR bytecode, or a fatbin (metadata read from PATH + ".json").
  static Module load(const std::string& path, Options options = {});
  /// Load bytecode held in memory; `name` is used in messages.
  static Module load(std::vector<std::uint8_t> bytecode, Options options = {},
                     std::string name = "<bytes>");
  /// Load an AOT fatbin and its metadata JSON text (FATBIN.md).
  static Module load_fatbin(std::vector<std::uint8_t> fatbin, const std::string& metadata_json,
                            Options options = {}, std::string name = "<fatbin>");

  const std::vector<Entry>& entries() const;
  /// Throws Errc::not_found listing the entries there are.
  Function function(const std::string& name) const;
  Version version() const;
  /// The deviations the reader accepted (message and byte offset); empty for a fatbin.
  const std::vector<DecodeWarning>& warnings() const;
  bool is_fatbin() const;
  /// The cache keys (one per toolchain record in the cache) of `entry` for `arch`.
  std::vector<std::string> cache_keys(const std::string& entry, const std::string& arch) const;

 private:
  explicit Module(std::shared_ptr<ModuleState> state) : state_(std::move(state)) {}
  std::shared_ptr<ModuleState> state_;
};

/// The current device's architecture ("sm_90"); opens the driver. Throws driver errors.
std::string current_device_arch();

/// Device memory through the dlopen'd driver, for programs that link nothing else from CUDA.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;
  DevicePtr ptr(const char* element = nullptr) const { return DevicePtr{address_, element}; }
  std::size_t size() const { return size_; }

 private:
  std::uint64_t address_ = 0;
  std::size_t size_ = 0;
};

/// Wait for all work in the current context (cuCtxSynchronize).
void synchronize();

// ---- argument conversion -----------------------------------------------------------------------

template <class T>
struct ElementName { static constexpr const char* value = nullptr; };
template <> struct ElementName<float> { static constexpr const char* value = "f32"; };
template <> struct ElementName<double> { static constexpr const char* value = "f64"; };
template <> struct ElementName<bool> { static constexpr const char* value = "i1"; };
template <> struct ElementName<std::int8_t> { static constexpr const char* value = "i8"; };
template <> struct ElementName<std::uint8_t> { static constexpr const char* value = "i8"; };
template <> struct ElementName<char> { static constexpr const char* value = "i8"; };
template <> struct ElementName<std::int16_t> { static constexpr const char* value = "i16"; };
template <> struct ElementName<std::uint16_t> { static constexpr const char* value = nullptr; };
template <> struct ElementName<std::int32_t> { static constexpr const char* value = "i32"; };
template <> struct ElementName<std::uint32_t> { static constexpr const char* value = "i32"; };
template <> struct ElementName<std::int64_t> { static constexpr const char* value = "i64"; };
template <> struct ElementName<std::uint64_t> { static constexpr const char* value = "i64"; };
template <> struct ElementName<F16> { static constexpr const char* value = "f16"; };
template <> struct ElementName<BF16> { static constexpr const char* value = "bf16"; };

const char* cpp_type_name(std::size_t size, bool is_signed, bool is_float, bool is_bool);

template <class T>
Arg Arg::from(T value) {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same<U, DevicePtr>::value) {
    return make(ParamKind::pointer, 64, value.element, "DevicePtr", &value.address, 8);
  } else if constexpr (std::is_pointer<U>::value) {
    using Pointee = std::remove_cv_t<std::remove_pointer_t<U>>;
    const std::uint64_t address = reinterpret_cast<std::uintptr_t>(value);
    return make(ParamKind::pointer, 64, ElementName<Pointee>::value, "pointer", &address, 8);
  } else if constexpr (std::is_same<U, std::nullptr_t>::value) {
    const std::uint64_t address = 0;
    return make(ParamKind::pointer, 64, nullptr, "nullptr", &address, 8);
  } else if constexpr (std::is_same<U, F16>::value || std::is_same<U, BF16>::value) {
    return make(ParamKind::floating, 16, ElementName<U>::value,
                std::is_same<U, F16>::value ? "F16" : "BF16", &value.bits, 2);
  } else if constexpr (std::is_floating_point<U>::value) {
    static_assert(sizeof(U) == 4 || sizeof(U) == 8, "long double cannot be passed to a kernel");
    return make(ParamKind::floating, sizeof(U) * 8, ElementName<U>::value,
                cpp_type_name(sizeof(U), true, true, false), &value, sizeof(U));
  } else if constexpr (std::is_same<U, bool>::value) {
    const std::uint8_t byte = value ? 1 : 0;
    return make(ParamKind::integer, 1, "i1", "bool", &byte, 1);
  } else if constexpr (std::is_integral<U>::value) {
    return make(ParamKind::integer, sizeof(U) * 8, nullptr,
                cpp_type_name(sizeof(U), std::is_signed<U>::value, false, false), &value, sizeof(U));
  } else {
    static_assert(std::is_pointer<U>::value, "unsupported kernel argument type");
    return Arg();
  }
}

}  // namespace tilebc
