/* tilebc C ABI: the C++ loader (tilebc/loader.hpp) behind opaque handles, for hosts in C, Rust,
 * Go, Julia, C# and anything else with a C FFI.
 *
 *   tilebc_module* module = NULL;
 *   if (tilebc_module_load_file("kernels.tilebc", NULL, &module) != TILEBC_OK) {
 *     fprintf(stderr, "%s\n", tilebc_last_error_message());
 *     return 1;
 *   }
 *   size_t count = 0;
 *   tilebc_module_entry_count(module, &count);
 *   ...
 *   tilebc_module_free(module);
 *
 * Rules:
 * - Every function that can fail returns a tilebc_status. TILEBC_OK is 0; on any other value the
 *   calling thread's last error (tilebc_last_error_message, _code, _offset) describes it. No C++
 *   exception ever crosses this boundary.
 * - Outputs are written only on success.
 * - Strings returned through `const char**` belong to the handle they came from and stay valid
 *   until it is freed. Handles may be used from several threads at once (the loader locks).
 * - Enumerations stored in structs are int32_t fields, so every language lays them out alike.
 * - Status values 1..10 equal the C++ loader's tilebc::Errc; the rest are specific to this ABI.
 */
#ifndef TILEBC_TILEBC_H
#define TILEBC_TILEBC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TILEBC_API __attribute__((visibility("default")))
#else
#define TILEBC_API
#endif

#define TILEBC_ABI_VERSION 1
/* Bytes a cache key needs as a C string: 64 hex digits and the terminating NUL. */
#define TILEBC_CACHE_KEY_SIZE 65

typedef enum tilebc_status {
  TILEBC_OK = 0,
  TILEBC_ERROR_MALFORMED = 1,           /* not valid bytecode, fatbin or metadata */
  TILEBC_ERROR_UNSUPPORTED_VERSION = 2, /* bytecode version outside 13.1-13.5 */
  TILEBC_ERROR_IO = 3,                  /* a file could not be read or written */
  TILEBC_ERROR_NOT_FOUND = 4,           /* no such entry, or no verified cache entry */
  TILEBC_ERROR_ARGUMENT_MISMATCH = 5,   /* launch arguments do not match the signature */
  TILEBC_ERROR_DRIVER_UNAVAILABLE = 6,  /* libcuda cannot be opened, or no device */
  TILEBC_ERROR_DRIVER = 7,              /* a CUDA driver call failed */
  TILEBC_ERROR_COMPILE_UNAVAILABLE = 8, /* nothing cached and compiling is off or impossible */
  TILEBC_ERROR_COMPILE_FAILED = 9,      /* the Python runtime ran and failed */
  TILEBC_ERROR_NO_CODE_FOR_DEVICE = 10, /* a fatbin has no image this device runs */
  TILEBC_ERROR_INVALID_ARGUMENT = 100,  /* a null pointer, an index out of range, a bad size */
  TILEBC_ERROR_OUT_OF_MEMORY = 101,
  TILEBC_ERROR_INTERNAL = 102           /* an unexpected failure inside the loader */
} tilebc_status;

/* How a kernel parameter is passed. */
typedef enum tilebc_param_kind {
  TILEBC_PARAM_POINTER = 0,
  TILEBC_PARAM_INTEGER = 1,
  TILEBC_PARAM_FLOAT = 2,
  TILEBC_PARAM_UNSUPPORTED = 3
} tilebc_param_kind;

/* Where an image's code came from. */
typedef enum tilebc_image_source {
  TILEBC_IMAGE_FATBIN = 0,
  TILEBC_IMAGE_CACHE = 1,
  TILEBC_IMAGE_COMPILED = 2
} tilebc_image_source;

typedef struct tilebc_module tilebc_module; /* a loaded bytecode file or AOT fatbin */
typedef struct tilebc_image tilebc_image;   /* a cubin (or fatbin) ready for the driver */

/* Loading options. Initialise with tilebc_options_init, then set what differs; passing NULL
 * where options are taken means the defaults. Strings are copied by the call. */
typedef struct tilebc_options {
  size_t struct_size;   /* sizeof(tilebc_options), set by tilebc_options_init */
  const char* cache_dir; /* cache root; NULL or "": the default ($TILEBC_CACHE_DIR, ...) */
  const char* arch;      /* target override ("sm_90"); NULL or "": the current device's */
  const char* compiler;  /* command run on a cache miss; NULL: $TILEBC_COMPILER or `tilebc` */
  int allow_compile;     /* nonzero (default): compile on a cache miss */
  int strict;            /* nonzero: refuse the deviations NVIDIA's reader accepts */
} tilebc_options;

/* One entry parameter. The strings belong to the module. */
typedef struct tilebc_param {
  const char* type;    /* Tile IR spelling, "tile<ptr<f32>>" */
  int32_t kind;        /* a tilebc_param_kind */
  const char* element; /* element type ("f32"); for pointers the pointee */
  unsigned bits;       /* element width (pointers: 64) */
  unsigned size;       /* bytes in the kernel parameter buffer; 0: cannot be passed */
} tilebc_param;

/* One launch argument. Build it with the tilebc_arg_* helpers below. */
typedef struct tilebc_arg {
  int32_t kind;        /* a tilebc_param_kind (fixed width for FFI; other values are refused) */
  unsigned bits;       /* scalar width; 64 for pointers */
  const char* element; /* element name when known ("f32"), NULL when untyped */
  uint64_t value;      /* the value's bits, little-endian in the low `bits` */
} tilebc_arg;

typedef struct tilebc_dim3 {
  unsigned x, y, z;
} tilebc_dim3;

/* ---- errors ----------------------------------------------------------------------------- */

/* The message of the last failed call on this thread ("" when none): lower-case, with the file
 * and byte offset in front where they are known. Valid until the next failing call. */
TILEBC_API const char* tilebc_last_error_message(void);
/* The status of the last failed call on this thread (TILEBC_OK when none). */
TILEBC_API tilebc_status tilebc_last_error_code(void);
/* The byte offset of the last failure in its file: 1 and *offset set when one is known. */
TILEBC_API int tilebc_last_error_offset(uint64_t* offset);
/* A fixed description of a status ("malformed input"); never NULL. */
TILEBC_API const char* tilebc_status_string(tilebc_status status);
/* The library version, "0.1.0". */
TILEBC_API const char* tilebc_version(void);

/* ---- modules ---------------------------------------------------------------------------- */

TILEBC_API void tilebc_options_init(tilebc_options* options);

/* Load Tile IR bytecode from a file, or an AOT fatbin (its metadata read from PATH.json). */
TILEBC_API tilebc_status tilebc_module_load_file(const char* path, const tilebc_options* options,
                                                 tilebc_module** module);
/* Load bytecode held in memory (copied); `name` (may be NULL) is used in messages. */
TILEBC_API tilebc_status tilebc_module_load_bytes(const void* data, size_t size, const char* name,
                                                  const tilebc_options* options,
                                                  tilebc_module** module);
/* Load an AOT fatbin held in memory with its metadata JSON text (FATBIN.md). */
TILEBC_API tilebc_status tilebc_module_load_fatbin(const void* fatbin, size_t size,
                                                   const char* metadata_json, const char* name,
                                                   const tilebc_options* options,
                                                   tilebc_module** module);
/* Release a module (NULL is ignored). Images taken from it stay valid. */
TILEBC_API void tilebc_module_free(tilebc_module* module);

TILEBC_API tilebc_status tilebc_module_version(const tilebc_module* module, int* major, int* minor);
/* 1 for an AOT fatbin, 0 for bytecode, in *is_fatbin. */
TILEBC_API tilebc_status tilebc_module_is_fatbin(const tilebc_module* module, int* is_fatbin);
/* Deviations the reader accepted (format_spec.md section 16); 0 for strict reads and fatbins. */
TILEBC_API tilebc_status tilebc_module_warning_count(const tilebc_module* module, size_t* count);
TILEBC_API tilebc_status tilebc_module_warning(const tilebc_module* module, size_t index,
                                               const char** message, uint64_t* offset);

/* ---- entries and signatures ------------------------------------------------------------- */

TILEBC_API tilebc_status tilebc_module_entry_count(const tilebc_module* module, size_t* count);
TILEBC_API tilebc_status tilebc_module_entry_name(const tilebc_module* module, size_t entry,
                                                  const char** name);
/* The index of the entry called `name`; TILEBC_ERROR_NOT_FOUND lists the entries there are. */
TILEBC_API tilebc_status tilebc_module_find_entry(const tilebc_module* module, const char* name,
                                                  size_t* entry);
/* "(tile<ptr<f32>>, tile<i32>) -> ()" */
TILEBC_API tilebc_status tilebc_entry_signature(const tilebc_module* module, size_t entry,
                                                const char** signature);
TILEBC_API tilebc_status tilebc_entry_param_count(const tilebc_module* module, size_t entry,
                                                  size_t* count);
TILEBC_API tilebc_status tilebc_entry_param(const tilebc_module* module, size_t entry, size_t index,
                                            tilebc_param* param);

/* ---- arguments and launch --------------------------------------------------------------- */

/* Check `args` against the entry's parameters: count, kind, width and, where an argument names
 * it, the element type. TILEBC_ERROR_ARGUMENT_MISMATCH says which argument and why. */
TILEBC_API tilebc_status tilebc_check_arguments(const tilebc_module* module, size_t entry,
                                                const tilebc_arg* args, size_t count);
/* Check, then launch on `stream` (a CUstream; NULL: the default stream). The first launch of an
 * entry finds or compiles its code and opens the driver. */
TILEBC_API tilebc_status tilebc_launch(const tilebc_module* module, size_t entry, tilebc_dim3 grid,
                                       const tilebc_arg* args, size_t count, void* stream);

/* ---- code and the cubin cache (runtime/CACHE.md) ---------------------------------------- */

/* The code `entry` would run on `arch` (NULL: the options' arch, else the current device's):
 * the module's fatbin, a verified cache entry, or a compile when allowed. */
TILEBC_API tilebc_status tilebc_module_image(const tilebc_module* module, size_t entry,
                                             const char* arch, tilebc_image** image);
/* The cache keys of `entry` for `arch`, one per toolchain record in the cache root's
 * toolchain.json, written to `keys` (capacity * TILEBC_CACHE_KEY_SIZE bytes, NUL-terminated
 * each). *count is set to the number of keys even when capacity is too small (then
 * TILEBC_ERROR_INVALID_ARGUMENT). */
TILEBC_API tilebc_status tilebc_module_cache_keys(const tilebc_module* module, size_t entry,
                                                  const char* arch, char* keys, size_t capacity,
                                                  size_t* count);
/* The verified entry `key` under the cache root `root` (NULL or "": the default root), trusted on
 * the Python runtime's terms; TILEBC_ERROR_NOT_FOUND when there is none that verifies. */
TILEBC_API tilebc_status tilebc_cache_lookup(const char* root, const char* key, tilebc_image** image);
/* The default cache root into `buffer` (NUL-terminated); *length is its length without the NUL,
 * also when `capacity` is too small (then TILEBC_ERROR_INVALID_ARGUMENT). An empty root means
 * the cache is off or no safe folder could be used. */
TILEBC_API tilebc_status tilebc_default_cache_root(char* buffer, size_t capacity, size_t* length);

TILEBC_API tilebc_status tilebc_image_data(const tilebc_image* image, const void** data, size_t* size);
/* Threads per CTA (0: ask the driver) and the dynamic shared memory a launch must request. */
TILEBC_API tilebc_status tilebc_image_launch_facts(const tilebc_image* image, unsigned* threads_per_cta,
                                                   unsigned* dynamic_shared_bytes);
/* Where the code came from; its arch ("sm_90"; "" from tilebc_cache_lookup); and the cached
 * cubin's path, the compile command, or the fatbin's name. */
TILEBC_API tilebc_status tilebc_image_origin(const tilebc_image* image, tilebc_image_source* source,
                                             const char** arch, const char** detail);
TILEBC_API void tilebc_image_free(tilebc_image* image);

/* ---- argument helpers ------------------------------------------------------------------- */

static inline tilebc_arg tilebc_arg_pointer(const void* address, const char* element) {
  tilebc_arg arg;
  arg.kind = TILEBC_PARAM_POINTER;
  arg.bits = 64;
  arg.element = element;
  arg.value = (uint64_t)(uintptr_t)address;
  return arg;
}
/* A device address held as an integer (CUdeviceptr). */
static inline tilebc_arg tilebc_arg_device_ptr(uint64_t address, const char* element) {
  tilebc_arg arg = tilebc_arg_pointer(NULL, element);
  arg.value = address;
  return arg;
}
static inline tilebc_arg tilebc_arg_integer(unsigned bits, uint64_t value) {
  tilebc_arg arg;
  arg.kind = TILEBC_PARAM_INTEGER;
  arg.bits = bits;
  arg.element = NULL;
  arg.value = bits >= 64 ? value : (value & ((((uint64_t)1) << bits) - 1));
  return arg;
}
static inline tilebc_arg tilebc_arg_bool(int value) {
  tilebc_arg arg = tilebc_arg_integer(1, value ? 1u : 0u);
  arg.element = "i1";
  return arg;
}
static inline tilebc_arg tilebc_arg_i8(int8_t value) { return tilebc_arg_integer(8, (uint64_t)(uint8_t)value); }
static inline tilebc_arg tilebc_arg_i16(int16_t value) { return tilebc_arg_integer(16, (uint64_t)(uint16_t)value); }
static inline tilebc_arg tilebc_arg_i32(int32_t value) { return tilebc_arg_integer(32, (uint64_t)(uint32_t)value); }
static inline tilebc_arg tilebc_arg_i64(int64_t value) { return tilebc_arg_integer(64, (uint64_t)value); }
static inline tilebc_arg tilebc_arg_f32(float value) {
  tilebc_arg arg;
  uint32_t bits;
  const unsigned char* from = (const unsigned char*)&value;
  unsigned char* to = (unsigned char*)&bits;
  size_t index;
  for (index = 0; index < sizeof bits; ++index) to[index] = from[index];
  arg.kind = TILEBC_PARAM_FLOAT;
  arg.bits = 32;
  arg.element = "f32";
  arg.value = bits;
  return arg;
}
static inline tilebc_arg tilebc_arg_f64(double value) {
  tilebc_arg arg;
  uint64_t bits;
  const unsigned char* from = (const unsigned char*)&value;
  unsigned char* to = (unsigned char*)&bits;
  size_t index;
  for (index = 0; index < sizeof bits; ++index) to[index] = from[index];
  arg.kind = TILEBC_PARAM_FLOAT;
  arg.bits = 64;
  arg.element = "f64";
  arg.value = bits;
  return arg;
}
/* Half-precision floats by their bit pattern. */
static inline tilebc_arg tilebc_arg_f16_bits(uint16_t bits) {
  tilebc_arg arg;
  arg.kind = TILEBC_PARAM_FLOAT;
  arg.bits = 16;
  arg.element = "f16";
  arg.value = bits;
  return arg;
}
static inline tilebc_arg tilebc_arg_bf16_bits(uint16_t bits) {
  tilebc_arg arg = tilebc_arg_f16_bits(bits);
  arg.element = "bf16";
  return arg;
}

#ifdef __cplusplus
}
#endif

#endif /* TILEBC_TILEBC_H */
