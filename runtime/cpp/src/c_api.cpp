// The C ABI (tilebc/tilebc.h) over the C++ loader. Every entry point catches everything: a
// tilebc::Error becomes its Errc's status, bad_alloc TILEBC_ERROR_OUT_OF_MEMORY, anything else
// TILEBC_ERROR_INTERNAL, and the message is kept in thread-local storage for the caller.
#include "tilebc/tilebc.h"

#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "tilebc/loader.hpp"

struct tilebc_module {
  tilebc::Module module;
};

struct tilebc_image {
  tilebc::Image image;
};

namespace {

struct LastError {
  tilebc_status code = TILEBC_OK;
  std::string message;
  std::optional<std::uint64_t> offset;
};

thread_local LastError last_error;

tilebc_status fail(tilebc_status code, std::string message) noexcept {
  last_error.message = std::move(message);
  last_error.code = code;
  last_error.offset.reset();
  return code;
}

/// Fail with a message built by `make`; building it may itself fail (then the text is empty).
template <class Make>
tilebc_status fail_with(tilebc_status code, Make&& make) noexcept {
  try {
    return fail(code, make());
  } catch (...) {
    return fail(code, std::string());
  }
}

/// Run `body`, turning every exception into a status and the thread's last error.
template <class Body>
tilebc_status guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    return TILEBC_OK;
  } catch (const tilebc::Error& error) {
    const tilebc_status code = static_cast<tilebc_status>(error.errc());
    fail_with(code, [&] { return std::string(error.what()); });
    last_error.offset = error.offset();
    return code;
  } catch (const std::bad_alloc&) {
    return fail_with(TILEBC_ERROR_OUT_OF_MEMORY, [&] { return std::string(function) + ": out of memory"; });
  } catch (const std::exception& error) {
    return fail_with(TILEBC_ERROR_INTERNAL, [&] { return std::string(function) + ": " + error.what(); });
  } catch (...) {
    return fail_with(TILEBC_ERROR_INTERNAL, [&] { return std::string(function) + ": unknown failure"; });
  }
}

}  // namespace

// Caller mistakes (null pointers, indices out of range) are TILEBC_ERROR_INVALID_ARGUMENT.
#define TILEBC_REQUIRE(condition, message)                                                       \
  do {                                                                                           \
    if (!(condition))                                                                            \
      return fail_with(TILEBC_ERROR_INVALID_ARGUMENT, [&] { return std::string(message); }); \
  } while (0)

namespace {

tilebc::Options to_options(const tilebc_options* options) {
  tilebc::Options result;
  if (!options) return result;
  if (options->cache_dir) result.cache_dir = options->cache_dir;
  if (options->arch) result.arch = options->arch;
  if (options->compiler) result.compiler = options->compiler;
  result.allow_compile = options->allow_compile != 0;
  result.strict = options->strict != 0;
  return result;
}

bool options_size_ok(const tilebc_options* options) {
  return !options || options->struct_size >= sizeof(tilebc_options);
}

std::int32_t to_c(tilebc::ParamKind kind) {
  switch (kind) {
    case tilebc::ParamKind::pointer: return TILEBC_PARAM_POINTER;
    case tilebc::ParamKind::integer: return TILEBC_PARAM_INTEGER;
    case tilebc::ParamKind::floating: return TILEBC_PARAM_FLOAT;
    case tilebc::ParamKind::unsupported: break;
  }
  return TILEBC_PARAM_UNSUPPORTED;
}

/// The C++ argument for a C one; `description` names the C type in mismatch messages.
tilebc::Arg to_cpp(const tilebc_arg& arg) {
  tilebc::Arg result;
  result.bits = arg.bits;
  result.element = arg.element ? arg.element : "";
  result.storage = arg.value;
  switch (arg.kind) {
    case TILEBC_PARAM_POINTER:
      result.kind = tilebc::ParamKind::pointer;
      result.description = result.element.empty() ? "pointer" : "a pointer to " + result.element;
      break;
    case TILEBC_PARAM_INTEGER:
      result.kind = tilebc::ParamKind::integer;
      result.description = arg.bits == 1 ? "bool" : "int" + std::to_string(arg.bits) + "_t";
      break;
    case TILEBC_PARAM_FLOAT:
      result.kind = tilebc::ParamKind::floating;
      result.description = arg.bits == 32 ? "float" : arg.bits == 64 ? "double" : result.element;
      break;
    default:
      result.kind = tilebc::ParamKind::unsupported;
      result.description = "an argument of unknown kind " + std::to_string(arg.kind);
      break;
  }
  return result;
}

std::vector<tilebc::Arg> to_cpp(const tilebc_arg* args, std::size_t count) {
  std::vector<tilebc::Arg> result;
  result.reserve(count);
  for (std::size_t index = 0; index < count; ++index) result.push_back(to_cpp(args[index]));
  return result;
}

std::string entry_range(const tilebc_module* module, std::size_t entry) {
  return "entry index " + std::to_string(entry) + " is out of range (the module has " +
         std::to_string(module->module.entries().size()) + " entries)";
}

tilebc_status store_module(tilebc::Module loaded, tilebc_module** out) {
  *out = new tilebc_module{std::move(loaded)};
  return TILEBC_OK;
}

}  // namespace

extern "C" {

const char* tilebc_last_error_message(void) { return last_error.message.c_str(); }

tilebc_status tilebc_last_error_code(void) { return last_error.code; }

int tilebc_last_error_offset(uint64_t* offset) {
  if (!last_error.offset) return 0;
  if (offset) *offset = *last_error.offset;
  return 1;
}

const char* tilebc_status_string(tilebc_status status) {
  switch (status) {
    case TILEBC_OK: return "ok";
    case TILEBC_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case TILEBC_ERROR_OUT_OF_MEMORY: return "out of memory";
    case TILEBC_ERROR_INTERNAL: return "internal error";
    default: break;
  }
  if (status >= TILEBC_ERROR_MALFORMED && status <= TILEBC_ERROR_NO_CODE_FOR_DEVICE) {
    // std::error_category::message builds a std::string; keep the texts static instead.
    static const char* const texts[] = {
        "malformed input", "unsupported bytecode version", "input/output error", "not found",
        "launch arguments do not match the signature", "CUDA driver unavailable",
        "CUDA driver call failed", "no cubin cached and compiling is unavailable",
        "the Python runtime failed to compile", "no code for this device"};
    return texts[status - TILEBC_ERROR_MALFORMED];
  }
  return "unknown status";
}

const char* tilebc_version(void) { return "0.1.0"; }

void tilebc_options_init(tilebc_options* options) {
  if (!options) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->allow_compile = 1;
}

tilebc_status tilebc_module_load_file(const char* path, const tilebc_options* options,
                                      tilebc_module** module) {
  TILEBC_REQUIRE(path, "tilebc_module_load_file: path is null");
  TILEBC_REQUIRE(module, "tilebc_module_load_file: module is null");
  TILEBC_REQUIRE(options_size_ok(options), "tilebc_module_load_file: options.struct_size is too small "
                                           "(call tilebc_options_init)");
  return guarded("tilebc_module_load_file", [&] {
    store_module(tilebc::Module::load(std::string(path), to_options(options)), module);
  });
}

tilebc_status tilebc_module_load_bytes(const void* data, size_t size, const char* name,
                                       const tilebc_options* options, tilebc_module** module) {
  TILEBC_REQUIRE(data || size == 0, "tilebc_module_load_bytes: data is null");
  TILEBC_REQUIRE(module, "tilebc_module_load_bytes: module is null");
  TILEBC_REQUIRE(options_size_ok(options), "tilebc_module_load_bytes: options.struct_size is too small "
                                           "(call tilebc_options_init)");
  return guarded("tilebc_module_load_bytes", [&] {
    const auto* bytes = static_cast<const std::uint8_t*>(data);
    std::vector<std::uint8_t> copy(bytes, bytes + size);
    store_module(tilebc::Module::load(std::move(copy), to_options(options), name ? name : "<bytes>"), module);
  });
}

tilebc_status tilebc_module_load_fatbin(const void* fatbin, size_t size, const char* metadata_json,
                                        const char* name, const tilebc_options* options,
                                        tilebc_module** module) {
  TILEBC_REQUIRE(fatbin || size == 0, "tilebc_module_load_fatbin: fatbin is null");
  TILEBC_REQUIRE(metadata_json, "tilebc_module_load_fatbin: metadata_json is null");
  TILEBC_REQUIRE(module, "tilebc_module_load_fatbin: module is null");
  TILEBC_REQUIRE(options_size_ok(options), "tilebc_module_load_fatbin: options.struct_size is too small "
                                           "(call tilebc_options_init)");
  return guarded("tilebc_module_load_fatbin", [&] {
    const auto* bytes = static_cast<const std::uint8_t*>(fatbin);
    std::vector<std::uint8_t> copy(bytes, bytes + size);
    store_module(tilebc::Module::load_fatbin(std::move(copy), metadata_json, to_options(options),
                                             name ? name : "<fatbin>"),
                 module);
  });
}

void tilebc_module_free(tilebc_module* module) { delete module; }

tilebc_status tilebc_module_version(const tilebc_module* module, int* major, int* minor) {
  TILEBC_REQUIRE(module, "tilebc_module_version: module is null");
  TILEBC_REQUIRE(major && minor, "tilebc_module_version: major or minor is null");
  return guarded("tilebc_module_version", [&] {
    const tilebc::Version version = module->module.version();
    *major = version.major;
    *minor = version.minor;
  });
}

tilebc_status tilebc_module_is_fatbin(const tilebc_module* module, int* is_fatbin) {
  TILEBC_REQUIRE(module, "tilebc_module_is_fatbin: module is null");
  TILEBC_REQUIRE(is_fatbin, "tilebc_module_is_fatbin: is_fatbin is null");
  *is_fatbin = module->module.is_fatbin() ? 1 : 0;
  return TILEBC_OK;
}

tilebc_status tilebc_module_warning_count(const tilebc_module* module, size_t* count) {
  TILEBC_REQUIRE(module, "tilebc_module_warning_count: module is null");
  TILEBC_REQUIRE(count, "tilebc_module_warning_count: count is null");
  *count = module->module.warnings().size();
  return TILEBC_OK;
}

tilebc_status tilebc_module_warning(const tilebc_module* module, size_t index, const char** message,
                                    uint64_t* offset) {
  TILEBC_REQUIRE(module, "tilebc_module_warning: module is null");
  TILEBC_REQUIRE(message, "tilebc_module_warning: message is null");
  const auto& warnings = module->module.warnings();
  TILEBC_REQUIRE(index < warnings.size(), "tilebc_module_warning: warning index " + std::to_string(index) +
                                              " is out of range (" + std::to_string(warnings.size()) +
                                              " warnings)");
  *message = warnings[index].message.c_str();
  if (offset) *offset = warnings[index].offset;
  return TILEBC_OK;
}

tilebc_status tilebc_module_entry_count(const tilebc_module* module, size_t* count) {
  TILEBC_REQUIRE(module, "tilebc_module_entry_count: module is null");
  TILEBC_REQUIRE(count, "tilebc_module_entry_count: count is null");
  *count = module->module.entries().size();
  return TILEBC_OK;
}

tilebc_status tilebc_module_entry_name(const tilebc_module* module, size_t entry, const char** name) {
  TILEBC_REQUIRE(module, "tilebc_module_entry_name: module is null");
  TILEBC_REQUIRE(name, "tilebc_module_entry_name: name is null");
  TILEBC_REQUIRE(entry < module->module.entries().size(),
                 "tilebc_module_entry_name: " + entry_range(module, entry));
  *name = module->module.entries()[entry].name.c_str();
  return TILEBC_OK;
}

tilebc_status tilebc_module_find_entry(const tilebc_module* module, const char* name, size_t* entry) {
  TILEBC_REQUIRE(module, "tilebc_module_find_entry: module is null");
  TILEBC_REQUIRE(name && entry, "tilebc_module_find_entry: name or entry is null");
  return guarded("tilebc_module_find_entry", [&] {
    const tilebc::Function function = module->module.function(name);  // not_found lists the names
    const auto& entries = module->module.entries();
    for (std::size_t index = 0; index < entries.size(); ++index)
      if (&entries[index] == &function.entry()) *entry = index;
  });
}

tilebc_status tilebc_entry_signature(const tilebc_module* module, size_t entry, const char** signature) {
  TILEBC_REQUIRE(module, "tilebc_entry_signature: module is null");
  TILEBC_REQUIRE(signature, "tilebc_entry_signature: signature is null");
  TILEBC_REQUIRE(entry < module->module.entries().size(), "tilebc_entry_signature: " + entry_range(module, entry));
  *signature = module->module.entries()[entry].signature.c_str();
  return TILEBC_OK;
}

tilebc_status tilebc_entry_param_count(const tilebc_module* module, size_t entry, size_t* count) {
  TILEBC_REQUIRE(module, "tilebc_entry_param_count: module is null");
  TILEBC_REQUIRE(count, "tilebc_entry_param_count: count is null");
  TILEBC_REQUIRE(entry < module->module.entries().size(), "tilebc_entry_param_count: " + entry_range(module, entry));
  *count = module->module.entries()[entry].params.size();
  return TILEBC_OK;
}

tilebc_status tilebc_entry_param(const tilebc_module* module, size_t entry, size_t index, tilebc_param* param) {
  TILEBC_REQUIRE(module, "tilebc_entry_param: module is null");
  TILEBC_REQUIRE(param, "tilebc_entry_param: param is null");
  TILEBC_REQUIRE(entry < module->module.entries().size(), "tilebc_entry_param: " + entry_range(module, entry));
  const tilebc::Entry& found = module->module.entries()[entry];
  TILEBC_REQUIRE(index < found.params.size(), "tilebc_entry_param: parameter index " + std::to_string(index) +
                                                  " is out of range ('" + found.name + "' has " +
                                                  std::to_string(found.params.size()) + " parameters)");
  const tilebc::Param& source = found.params[index];
  param->type = source.type.c_str();
  param->kind = to_c(source.kind);
  param->element = source.element.c_str();
  param->bits = source.bits;
  param->size = source.size;
  return TILEBC_OK;
}

tilebc_status tilebc_check_arguments(const tilebc_module* module, size_t entry, const tilebc_arg* args,
                                     size_t count) {
  TILEBC_REQUIRE(module, "tilebc_check_arguments: module is null");
  TILEBC_REQUIRE(args || count == 0, "tilebc_check_arguments: args is null");
  TILEBC_REQUIRE(entry < module->module.entries().size(), "tilebc_check_arguments: " + entry_range(module, entry));
  return guarded("tilebc_check_arguments", [&] {
    tilebc::check_arguments(module->module.entries()[entry], to_cpp(args, count));
  });
}

tilebc_status tilebc_launch(const tilebc_module* module, size_t entry, tilebc_dim3 grid, const tilebc_arg* args,
                            size_t count, void* stream) {
  TILEBC_REQUIRE(module, "tilebc_launch: module is null");
  TILEBC_REQUIRE(args || count == 0, "tilebc_launch: args is null");
  TILEBC_REQUIRE(entry < module->module.entries().size(), "tilebc_launch: " + entry_range(module, entry));
  return guarded("tilebc_launch", [&] {
    const tilebc::Function function = module->module.function(module->module.entries()[entry].name);
    function.launch_args(tilebc::Dim3(grid.x, grid.y, grid.z), to_cpp(args, count), tilebc::Stream{stream});
  });
}

tilebc_status tilebc_module_image(const tilebc_module* module, size_t entry, const char* arch,
                                  tilebc_image** image) {
  TILEBC_REQUIRE(module, "tilebc_module_image: module is null");
  TILEBC_REQUIRE(image, "tilebc_module_image: image is null");
  TILEBC_REQUIRE(entry < module->module.entries().size(), "tilebc_module_image: " + entry_range(module, entry));
  return guarded("tilebc_module_image", [&] {
    const tilebc::Function function = module->module.function(module->module.entries()[entry].name);
    *image = new tilebc_image{function.image(arch ? arch : "")};
  });
}

tilebc_status tilebc_module_cache_keys(const tilebc_module* module, size_t entry, const char* arch, char* keys,
                                       size_t capacity, size_t* count) {
  TILEBC_REQUIRE(module, "tilebc_module_cache_keys: module is null");
  TILEBC_REQUIRE(arch && *arch, "tilebc_module_cache_keys: arch is null or empty");
  TILEBC_REQUIRE(count, "tilebc_module_cache_keys: count is null");
  TILEBC_REQUIRE(keys || capacity == 0, "tilebc_module_cache_keys: keys is null");
  TILEBC_REQUIRE(entry < module->module.entries().size(), "tilebc_module_cache_keys: " + entry_range(module, entry));
  std::vector<std::string> found;
  const tilebc_status status = guarded("tilebc_module_cache_keys", [&] {
    found = module->module.cache_keys(module->module.entries()[entry].name, arch);
  });
  if (status != TILEBC_OK) return status;
  *count = found.size();
  TILEBC_REQUIRE(found.size() <= capacity, "tilebc_module_cache_keys: " + std::to_string(found.size()) +
                                               " keys do not fit in room for " + std::to_string(capacity));
  for (std::size_t index = 0; index < found.size(); ++index) {
    char* slot = keys + index * TILEBC_CACHE_KEY_SIZE;
    std::memcpy(slot, found[index].c_str(), found[index].size() + 1);  // keys are 64 hex digits
  }
  return TILEBC_OK;
}

tilebc_status tilebc_cache_lookup(const char* root, const char* key, tilebc_image** image) {
  TILEBC_REQUIRE(key, "tilebc_cache_lookup: key is null");
  TILEBC_REQUIRE(image, "tilebc_cache_lookup: image is null");
  TILEBC_REQUIRE(std::strlen(key) == TILEBC_CACHE_KEY_SIZE - 1 &&
                     std::strspn(key, "0123456789abcdef") == TILEBC_CACHE_KEY_SIZE - 1,
                 "tilebc_cache_lookup: key must be 64 lower-case hex digits");
  std::string chosen;
  std::optional<tilebc::CachedCubin> found;
  const tilebc_status status = guarded("tilebc_cache_lookup", [&] {
    chosen = (root && *root) ? std::string(root) : tilebc::default_cache_root();
    if (!chosen.empty()) found = tilebc::cache_lookup(chosen, key);
  });
  if (status != TILEBC_OK) return status;
  if (chosen.empty()) return fail_with(TILEBC_ERROR_NOT_FOUND, [] { return std::string("tilebc_cache_lookup: the cache is off"); });
  if (!found)
    return fail_with(TILEBC_ERROR_NOT_FOUND,
                     [&] { return chosen + ": no verified cache entry for key " + key; });
  return guarded("tilebc_cache_lookup", [&] {
    tilebc::Image result;
    result.source = tilebc::Image::Source::cache;
    result.bytes = std::move(found->cubin);
    result.threads_per_cta = found->threads_per_cta;
    result.dynamic_shared_bytes = found->dynamic_shared_bytes;
    result.detail = found->cubin_path;
    *image = new tilebc_image{std::move(result)};
  });
}

tilebc_status tilebc_default_cache_root(char* buffer, size_t capacity, size_t* length) {
  TILEBC_REQUIRE(length, "tilebc_default_cache_root: length is null");
  TILEBC_REQUIRE(buffer || capacity == 0, "tilebc_default_cache_root: buffer is null");
  std::string root;
  const tilebc_status status = guarded("tilebc_default_cache_root", [&] { root = tilebc::default_cache_root(); });
  if (status != TILEBC_OK) return status;
  *length = root.size();
  TILEBC_REQUIRE(root.size() < capacity, "tilebc_default_cache_root: the root needs " +
                                             std::to_string(root.size() + 1) + " bytes, the buffer has " +
                                             std::to_string(capacity));
  std::memcpy(buffer, root.c_str(), root.size() + 1);
  return TILEBC_OK;
}

tilebc_status tilebc_image_data(const tilebc_image* image, const void** data, size_t* size) {
  TILEBC_REQUIRE(image, "tilebc_image_data: image is null");
  TILEBC_REQUIRE(data && size, "tilebc_image_data: data or size is null");
  *data = image->image.bytes.data();
  *size = image->image.bytes.size();
  return TILEBC_OK;
}

tilebc_status tilebc_image_launch_facts(const tilebc_image* image, unsigned* threads_per_cta,
                                        unsigned* dynamic_shared_bytes) {
  TILEBC_REQUIRE(image, "tilebc_image_launch_facts: image is null");
  TILEBC_REQUIRE(threads_per_cta && dynamic_shared_bytes,
                 "tilebc_image_launch_facts: threads_per_cta or dynamic_shared_bytes is null");
  *threads_per_cta = image->image.threads_per_cta;
  *dynamic_shared_bytes = image->image.dynamic_shared_bytes;
  return TILEBC_OK;
}

tilebc_status tilebc_image_origin(const tilebc_image* image, tilebc_image_source* source, const char** arch,
                                  const char** detail) {
  TILEBC_REQUIRE(image, "tilebc_image_origin: image is null");
  if (source) {
    switch (image->image.source) {
      case tilebc::Image::Source::fatbin: *source = TILEBC_IMAGE_FATBIN; break;
      case tilebc::Image::Source::cache: *source = TILEBC_IMAGE_CACHE; break;
      case tilebc::Image::Source::compiled: *source = TILEBC_IMAGE_COMPILED; break;
    }
  }
  if (arch) *arch = image->image.arch.c_str();
  if (detail) *detail = image->image.detail.c_str();
  return TILEBC_OK;
}

void tilebc_image_free(tilebc_image* image) { delete image; }

}  // extern "C"
