/* Tests of the C ABI (tilebc/tilebc.h), compiled as C99: load, entries, signatures, argument
 * checking, the cache lookup, and every error path's status and message. Needs no GPU.
 *
 *   tilebc_c_tests FIXTURES_DIR CACHE_ROOT BAD_TOOLCHAIN_ROOT POISONED_ROOT
 *
 * CACHE_ROOT holds a verified entry for the scalar_params fixture's entry on sm_90 and a
 * toolchain.json naming its toolchain (tests/test_c_api.py writes it with the Python runtime);
 * BAD_TOOLCHAIN_ROOT has a malformed toolchain.json; POISONED_ROOT holds the same entry with a
 * cubin that does not match its metadata. Prints "key ENTRY KEY" and "image SIZE THREADS" for the
 * Python side to compare, and "N checks, F failures" last.
 */
#ifdef __cplusplus
#error "this file tests the C ABI: compile it as C"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilebc/tilebc.h"

static int g_checks = 0;
static int g_failures = 0;

static void expect(int condition, const char* what) {
  ++g_checks;
  if (!condition) {
    ++g_failures;
    fprintf(stderr, "FAIL: %s\n", what);
  }
}

/* `got` is `want`, the thread's last error agrees, and its message contains `needle`. */
static void expect_error(const char* name, tilebc_status got, tilebc_status want, const char* needle) {
  ++g_checks;
  if (got != want || tilebc_last_error_code() != want) {
    ++g_failures;
    fprintf(stderr, "FAIL: %s: status %d (last %d), expected %d; message: %s\n", name, (int)got,
            (int)tilebc_last_error_code(), (int)want, tilebc_last_error_message());
    return;
  }
  if (tilebc_last_error_message()[0] == '\0' || strstr(tilebc_last_error_message(), needle) == NULL) {
    ++g_failures;
    fprintf(stderr, "FAIL: %s: message '%s' does not contain '%s'\n", name, tilebc_last_error_message(), needle);
  }
}

static void expect_ok(const char* name, tilebc_status got) {
  ++g_checks;
  if (got != TILEBC_OK) {
    ++g_failures;
    fprintf(stderr, "FAIL: %s: status %d: %s\n", name, (int)got, tilebc_last_error_message());
  }
}

static void test_status_texts(void) {
  static const tilebc_status all[] = {
      TILEBC_OK, TILEBC_ERROR_MALFORMED, TILEBC_ERROR_UNSUPPORTED_VERSION, TILEBC_ERROR_IO,
      TILEBC_ERROR_NOT_FOUND, TILEBC_ERROR_ARGUMENT_MISMATCH, TILEBC_ERROR_DRIVER_UNAVAILABLE,
      TILEBC_ERROR_DRIVER, TILEBC_ERROR_COMPILE_UNAVAILABLE, TILEBC_ERROR_COMPILE_FAILED,
      TILEBC_ERROR_NO_CODE_FOR_DEVICE, TILEBC_ERROR_INVALID_ARGUMENT, TILEBC_ERROR_OUT_OF_MEMORY,
      TILEBC_ERROR_INTERNAL};
  size_t index;
  for (index = 0; index < sizeof all / sizeof all[0]; ++index)
    expect(tilebc_status_string(all[index]) != NULL && tilebc_status_string(all[index])[0] != '\0',
           "every status has a text");
  expect(strcmp(tilebc_status_string((tilebc_status)55), "unknown status") == 0, "unknown status text");
  expect(strcmp(tilebc_version(), "0.1.0") == 0, "version");
}

static void test_load_errors(const char* fixtures) {
  tilebc_module* module = (tilebc_module*)&g_checks; /* must stay untouched on failure */
  tilebc_options options;
  char path[4096];
  uint64_t offset = 12345;
  static const unsigned char garbage[] = {0x7f, 'E', 'L', 'F', 0, 0, 0, 0};
  /* the Tile IR magic, then version 20.5 */
  static const unsigned char future[] = {0x7f, 'T', 'i', 'l', 'e', 'I', 'R', 0, 20, 5, 0, 0};

  expect_error("load_file(NULL)", tilebc_module_load_file(NULL, NULL, &module), TILEBC_ERROR_INVALID_ARGUMENT,
               "path is null");
  expect_error("load_file(out NULL)", tilebc_module_load_file("x", NULL, NULL), TILEBC_ERROR_INVALID_ARGUMENT,
               "module is null");
  expect(tilebc_last_error_offset(&offset) == 0 && offset == 12345, "no offset for a null argument");

  snprintf(path, sizeof path, "%s/no/such/file.tilebc", fixtures);
  expect_error("load_file(missing)", tilebc_module_load_file(path, NULL, &module), TILEBC_ERROR_IO,
               "no/such/file.tilebc");

  expect_error("load_bytes(garbage)", tilebc_module_load_bytes(garbage, sizeof garbage, "garbage.tilebc", NULL,
                                                               &module),
               TILEBC_ERROR_MALFORMED, "garbage.tilebc: offset 0x");
  expect(tilebc_last_error_offset(&offset) == 1, "a malformed file's error has an offset");
  expect_error("load_bytes(version 20.5)", tilebc_module_load_bytes(future, sizeof future, NULL, NULL, &module),
               TILEBC_ERROR_UNSUPPORTED_VERSION, "20.5");
  expect_error("load_bytes(NULL data)", tilebc_module_load_bytes(NULL, 4, NULL, NULL, &module),
               TILEBC_ERROR_INVALID_ARGUMENT, "data is null");
  expect_error("load_bytes(empty)", tilebc_module_load_bytes(garbage, 0, NULL, NULL, &module),
               TILEBC_ERROR_MALFORMED, "<bytes>");

  memset(&options, 0, sizeof options); /* struct_size 0: not initialised */
  expect_error("load_bytes(uninitialised options)", tilebc_module_load_bytes(garbage, sizeof garbage, NULL,
                                                                             &options, &module),
               TILEBC_ERROR_INVALID_ARGUMENT, "struct_size");

  expect_error("load_fatbin(garbage)", tilebc_module_load_fatbin(garbage, sizeof garbage, "{}", "k.fatbin", NULL,
                                                                 &module),
               TILEBC_ERROR_MALFORMED, "k.fatbin");
  expect_error("load_fatbin(NULL metadata)", tilebc_module_load_fatbin(garbage, sizeof garbage, NULL, NULL, NULL,
                                                                       &module),
               TILEBC_ERROR_INVALID_ARGUMENT, "metadata_json is null");
  expect(module == (tilebc_module*)&g_checks, "outputs untouched on failure");
  tilebc_module_free(NULL);
  tilebc_image_free(NULL);
}

static tilebc_module* load_scalar_params(const char* fixtures, const tilebc_options* options) {
  char path[4096];
  tilebc_module* module = NULL;
  snprintf(path, sizeof path, "%s/bytecode/scalar_params/scalar_params-13.5.tilebc", fixtures);
  expect_ok("load_file(scalar_params)", tilebc_module_load_file(path, options, &module));
  return module;
}

static void test_entries(const tilebc_module* module) {
  int major = 0, minor = 0, fatbin = -1;
  size_t count = 0, found = 99, params = 0, warnings = 9;
  const char* name = NULL;
  const char* signature = NULL;
  const char* message = NULL;
  tilebc_param param;

  expect_ok("version", tilebc_module_version(module, &major, &minor));
  expect(major == 13 && minor == 5, "version 13.5");
  expect_ok("is_fatbin", tilebc_module_is_fatbin(module, &fatbin));
  expect(fatbin == 0, "bytecode is not a fatbin");
  expect_ok("warning_count", tilebc_module_warning_count(module, &warnings));
  expect(warnings == 0, "no warnings");
  expect_error("warning(0)", tilebc_module_warning(module, 0, &message, NULL), TILEBC_ERROR_INVALID_ARGUMENT,
               "out of range");
  expect_error("version(NULL module)", tilebc_module_version(NULL, &major, &minor), TILEBC_ERROR_INVALID_ARGUMENT,
               "module is null");

  expect_ok("entry_count", tilebc_module_entry_count(module, &count));
  expect(count == 1, "one entry");
  expect_ok("entry_name", tilebc_module_entry_name(module, 0, &name));
  expect(name != NULL && strncmp(name, "scalar_params", 13) == 0, "entry name");
  expect_ok("find_entry", tilebc_module_find_entry(module, name, &found));
  expect(found == 0, "find_entry finds entry 0");
  expect_error("find_entry(nope)", tilebc_module_find_entry(module, "nope", &found), TILEBC_ERROR_NOT_FOUND,
               "no entry named 'nope' (entries: scalar_params");
  expect_error("entry_name(1)", tilebc_module_entry_name(module, 1, &name), TILEBC_ERROR_INVALID_ARGUMENT,
               "entry index 1 is out of range (the module has 1 entries)");
  expect_error("entry_count(NULL)", tilebc_module_entry_count(module, NULL), TILEBC_ERROR_INVALID_ARGUMENT,
               "count is null");

  expect_ok("signature", tilebc_entry_signature(module, 0, &signature));
  expect(signature != NULL && strncmp(signature, "(tile<ptr<f32>>, tile<i32>", 26) == 0, "signature text");
  expect_error("signature(7)", tilebc_entry_signature(module, 7, &signature), TILEBC_ERROR_INVALID_ARGUMENT,
               "out of range");
  expect_ok("param_count", tilebc_entry_param_count(module, 0, &params));
  expect(params == 9, "nine parameters");
  expect_ok("param 0", tilebc_entry_param(module, 0, 0, &param));
  expect(param.kind == TILEBC_PARAM_POINTER && strcmp(param.element, "f32") == 0 && param.size == 8 &&
             strcmp(param.type, "tile<ptr<f32>>") == 0,
         "param 0 is a pointer to f32");
  expect_ok("param 4", tilebc_entry_param(module, 0, 4, &param));
  expect(param.kind == TILEBC_PARAM_FLOAT && param.bits == 64 && param.size == 8, "param 4 is f64");
  expect_ok("param 8", tilebc_entry_param(module, 0, 8, &param));
  expect(param.kind == TILEBC_PARAM_INTEGER && param.bits == 1 && param.size == 1, "param 8 is i1");
  expect_error("param 9", tilebc_entry_param(module, 0, 9, &param), TILEBC_ERROR_INVALID_ARGUMENT,
               "parameter index 9 is out of range");
}

static void good_arguments(tilebc_arg* args, float* buffer) {
  args[0] = tilebc_arg_pointer(buffer, "f32");
  args[1] = tilebc_arg_i32(64);
  args[2] = tilebc_arg_i32(1);
  args[3] = tilebc_arg_f32(2.5f);
  args[4] = tilebc_arg_f64(0.25);
  args[5] = tilebc_arg_i64(-7);
  args[6] = tilebc_arg_i16(3);
  args[7] = tilebc_arg_i8(-1);
  args[8] = tilebc_arg_bool(1);
}

static void test_arguments(const tilebc_module* module) {
  tilebc_arg args[9];
  float buffer[4];
  tilebc_dim3 grid = {1, 1, 1};
  tilebc_dim3 empty = {0, 1, 1};

  good_arguments(args, buffer);
  expect_ok("check good arguments", tilebc_check_arguments(module, 0, args, 9));
  args[0] = tilebc_arg_device_ptr(0x1000, NULL); /* an untyped pointer is accepted */
  expect_ok("check untyped pointer", tilebc_check_arguments(module, 0, args, 9));
  expect(args[7].value == 0xff && args[5].value == (uint64_t)-7, "helpers keep the bit patterns");

  expect_error("check 8 arguments", tilebc_check_arguments(module, 0, args, 8), TILEBC_ERROR_ARGUMENT_MISMATCH,
               "takes 9 arguments");
  good_arguments(args, buffer);
  args[3] = tilebc_arg_i32(2);
  expect_error("check kind", tilebc_check_arguments(module, 0, args, 9), TILEBC_ERROR_ARGUMENT_MISMATCH,
               "argument 3 of 'scalar_params");
  good_arguments(args, buffer);
  args[1] = tilebc_arg_i64(64);
  expect_error("check width", tilebc_check_arguments(module, 0, args, 9), TILEBC_ERROR_ARGUMENT_MISMATCH,
               "got int64_t (64-bit integer)");
  good_arguments(args, buffer);
  args[0] = tilebc_arg_pointer(buffer, "f64");
  expect_error("check pointee", tilebc_check_arguments(module, 0, args, 9), TILEBC_ERROR_ARGUMENT_MISMATCH,
               "must be a pointer to f32");
  good_arguments(args, buffer);
  args[4] = tilebc_arg_f32(0.25f);
  expect_error("check float width", tilebc_check_arguments(module, 0, args, 9), TILEBC_ERROR_ARGUMENT_MISMATCH,
               "argument 4");
  good_arguments(args, buffer);
  args[2].kind = 42;
  expect_error("check unknown kind", tilebc_check_arguments(module, 0, args, 9), TILEBC_ERROR_ARGUMENT_MISMATCH,
               "unknown kind 42");
  expect_error("check NULL args", tilebc_check_arguments(module, 0, NULL, 9), TILEBC_ERROR_INVALID_ARGUMENT,
               "args is null");
  expect_error("check entry 3", tilebc_check_arguments(module, 3, args, 9), TILEBC_ERROR_INVALID_ARGUMENT,
               "out of range");

  /* launches refuse bad arguments before the driver is touched */
  expect_error("launch mismatch", tilebc_launch(module, 0, grid, args, 9, NULL), TILEBC_ERROR_ARGUMENT_MISMATCH,
               "argument 2");
  good_arguments(args, buffer);
  expect_error("launch empty grid", tilebc_launch(module, 0, empty, args, 9, NULL),
               TILEBC_ERROR_ARGUMENT_MISMATCH, "has an empty dimension");
  /* the test runs with TILEBC_LIBCUDA naming a library that does not exist */
  expect_error("launch without a driver", tilebc_launch(module, 0, grid, args, 9, NULL),
               TILEBC_ERROR_DRIVER_UNAVAILABLE, "libcuda");
}

static void test_cache(const char* fixtures, const char* root, const char* bad_root, const char* poisoned_root) {
  tilebc_options options;
  tilebc_module* module;
  tilebc_image* image = NULL;
  tilebc_image* again = NULL;
  char keys[2 * TILEBC_CACHE_KEY_SIZE];
  char small[4];
  char root_buffer[4096];
  size_t count = 0, length = 0, size = 0, size_again = 0;
  const void* data = NULL;
  const void* data_again = NULL;
  unsigned threads = 0, shared = 0;
  tilebc_image_source source = TILEBC_IMAGE_FATBIN;
  const char* arch = NULL;
  const char* detail = NULL;
  const char* name = NULL;

  tilebc_options_init(&options);
  expect(options.struct_size == sizeof options && options.allow_compile == 1, "options_init defaults");
  options.cache_dir = root;
  options.allow_compile = 0;
  module = load_scalar_params(fixtures, &options);
  if (!module) return;
  tilebc_module_entry_name(module, 0, &name);

  expect_ok("cache_keys", tilebc_module_cache_keys(module, 0, "sm_90", keys, 2, &count));
  expect(count == 1 && strlen(keys) == 64, "one 64-digit key");
  printf("key %s %s\n", name, keys);
  count = 0;
  expect_error("cache_keys(no room)", tilebc_module_cache_keys(module, 0, "sm_90", NULL, 0, &count),
               TILEBC_ERROR_INVALID_ARGUMENT, "1 keys do not fit");
  expect(count == 1, "count is set even without room");
  expect_error("cache_keys(NULL arch)", tilebc_module_cache_keys(module, 0, NULL, keys, 2, &count),
               TILEBC_ERROR_INVALID_ARGUMENT, "arch is null");

  expect_ok("module_image(sm_90)", tilebc_module_image(module, 0, "sm_90", &image));
  if (image) {
    expect_ok("image_data", tilebc_image_data(image, &data, &size));
    expect_ok("image_launch_facts", tilebc_image_launch_facts(image, &threads, &shared));
    expect_ok("image_origin", tilebc_image_origin(image, &source, &arch, &detail));
    expect(source == TILEBC_IMAGE_CACHE && strcmp(arch, "sm_90") == 0 && strstr(detail, keys) != NULL &&
               strcmp(detail + strlen(detail) - 6, ".cubin") == 0,
           "the image comes from the cache entry of its key");
    printf("image %zu %u\n", size, threads);
  }
  expect_ok("cache_lookup", tilebc_cache_lookup(root, keys, &again));
  if (again && image) {
    expect_ok("image_data(lookup)", tilebc_image_data(again, &data_again, &size_again));
    expect(size == size_again && memcmp(data, data_again, size) == 0, "lookup returns the same cubin");
  }
  tilebc_image_free(again);
  tilebc_image_free(image);
  image = NULL;

  expect_error("module_image(sm_80), compiling off", tilebc_module_image(module, 0, "sm_80", &image),
               TILEBC_ERROR_COMPILE_UNAVAILABLE, "compiling is disabled");
  expect(image == NULL, "no image on failure");
  expect_error("cache_lookup(absent key)",
               tilebc_cache_lookup(root, "00000000000000000000000000000000000000000000000000000000000000ff", &image),
               TILEBC_ERROR_NOT_FOUND, "no verified cache entry for key 00000000");
  expect_error("cache_lookup(bad key)", tilebc_cache_lookup(root, "xyz", &image), TILEBC_ERROR_INVALID_ARGUMENT,
               "64 lower-case hex digits");
  expect_error("cache_lookup(poisoned)", tilebc_cache_lookup(poisoned_root, keys, &image), TILEBC_ERROR_NOT_FOUND,
               "no verified cache entry");
  expect(image == NULL, "a poisoned entry gives no image");
  expect_error("image_data(NULL)", tilebc_image_data(NULL, &data, &size), TILEBC_ERROR_INVALID_ARGUMENT,
               "image is null");
  tilebc_module_free(module);

  options.cache_dir = bad_root;
  module = load_scalar_params(fixtures, &options);
  if (module) {
    expect_error("cache_keys(malformed toolchain.json)", tilebc_module_cache_keys(module, 0, "sm_90", keys, 2, &count),
                 TILEBC_ERROR_MALFORMED, "toolchain.json");
    tilebc_module_free(module);
  }

  expect_error("default_cache_root(small)", tilebc_default_cache_root(small, sizeof small, &length),
               TILEBC_ERROR_INVALID_ARGUMENT, "the buffer has 4");
  expect_ok("default_cache_root", tilebc_default_cache_root(root_buffer, sizeof root_buffer, &length));
  expect(length == strlen(root_buffer), "default root length");
}

int main(int argc, char** argv) {
  tilebc_module* module;
  if (argc < 5) {
    fprintf(stderr, "usage: tilebc_c_tests FIXTURES_DIR CACHE_ROOT BAD_TOOLCHAIN_ROOT POISONED_ROOT\n");
    return 2;
  }
  test_status_texts();
  test_load_errors(argv[1]);
  module = load_scalar_params(argv[1], NULL);
  if (module) {
    test_entries(module);
    test_arguments(module);
    tilebc_module_free(module);
  }
  test_cache(argv[1], argv[2], argv[3], argv[4]);
  printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
