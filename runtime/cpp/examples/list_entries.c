/* List a Tile IR bytecode file's entries and parameters through the C ABI (tilebc/tilebc.h),
 * and say where each entry's code for ARCH would come from.
 *
 *   list_entries FILE [ARCH]
 *
 * Built by CMake (list_entries_c), or against an installed package with
 *   cc list_entries.c $(pkg-config --cflags --libs tilebc)
 */
#ifdef __cplusplus
#error "this file tests the C ABI: compile it as C"
#endif

#include <stdio.h>

#include "tilebc/tilebc.h"

static const char* kind_name(tilebc_param_kind kind) {
  switch (kind) {
    case TILEBC_PARAM_POINTER: return "pointer";
    case TILEBC_PARAM_INTEGER: return "integer";
    case TILEBC_PARAM_FLOAT: return "float";
    default: return "unsupported";
  }
}

static int report(tilebc_status status) {
  fprintf(stderr, "error %d (%s): %s\n", (int)status, tilebc_status_string(status), tilebc_last_error_message());
  return 1;
}

int main(int argc, char** argv) {
  tilebc_module* module = NULL;
  tilebc_options options;
  tilebc_status status;
  size_t count = 0, entry, index;
  int major = 0, minor = 0;

  if (argc < 2) {
    fprintf(stderr, "usage: list_entries FILE [ARCH]\n");
    return 2;
  }
  tilebc_options_init(&options);
  options.allow_compile = 0; /* only say what is cached; never run a compiler */
  status = tilebc_module_load_file(argv[1], &options, &module);
  if (status != TILEBC_OK) return report(status);
  tilebc_module_version(module, &major, &minor);
  tilebc_module_entry_count(module, &count);
  printf("%s: bytecode %d.%d, %zu entries (tilebc %s)\n", argv[1], major, minor, count, tilebc_version());
  for (entry = 0; entry < count; ++entry) {
    const char* name = NULL;
    const char* signature = NULL;
    size_t params = 0;
    tilebc_module_entry_name(module, entry, &name);
    tilebc_entry_signature(module, entry, &signature);
    tilebc_entry_param_count(module, entry, &params);
    printf("  %s %s\n", name, signature);
    for (index = 0; index < params; ++index) {
      tilebc_param param;
      tilebc_entry_param(module, entry, index, &param);
      printf("    %s: %s, %u bytes\n", param.type, kind_name(param.kind), param.size);
    }
    if (argc > 2) {
      tilebc_image* image = NULL;
      status = tilebc_module_image(module, entry, argv[2], &image);
      if (status == TILEBC_OK) {
        const void* data = NULL;
        size_t size = 0;
        tilebc_image_data(image, &data, &size);
        printf("    %s: cached cubin, %zu bytes\n", argv[2], size);
        tilebc_image_free(image);
      } else {
        printf("    %s: not cached (%s)\n", argv[2], tilebc_status_string(status));
      }
    }
  }
  tilebc_module_free(module);
  return 0;
}
