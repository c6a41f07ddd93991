// C++ unit tests that need no GPU: argument checking, launch refusing before the driver, the
// no-driver message, SHA-256 vectors and error formatting, and TMA launches against a fake driver
// table. Run: tilebc_cpp_tests FIXTURES_DIR [TMA_FATBIN CACHE_ROOT CACHE_KEY]
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "driver.hpp"
#include "tilebc/loader.hpp"
#include "tilebc/sha256.hpp"

namespace {

int g_failures = 0;
int g_checks = 0;

void expect(bool condition, const std::string& what) {
  ++g_checks;
  if (!condition) {
    ++g_failures;
    std::cerr << "FAIL: " << what << "\n";
  }
}

/// `body` throws tilebc::Error with `code` and a message starting with `prefix`.
void expect_error(const std::string& name, tilebc::Errc code, const std::string& prefix,
                  const std::function<void()>& body) {
  try {
    body();
  } catch (const tilebc::Error& error) {
    expect(error.errc() == code, name + ": error code " + error.code().message());
    expect(error.message().rfind(prefix, 0) == 0,
           name + ": message '" + error.message() + "' does not start with '" + prefix + "'");
    return;
  }
  expect(false, name + ": no error thrown");
}

// ---- a driver table that records what the loader passes ----------------------------------------

struct EncodeCall {
  CUtensorMapDataType type;
  unsigned rank;
  std::uint64_t address;
  std::vector<std::uint64_t> dims, strides;
  std::vector<std::uint32_t> box, element_strides;
  CUtensorMapInterleave interleave;
  CUtensorMapSwizzle swizzle;
  CUtensorMapL2promotion l2;
  CUtensorMapFloatOOBfill fill;
};
std::vector<EncodeCall> g_encoded;
std::vector<std::vector<unsigned char>> g_params;  // each kernel parameter's bytes at the last launch
std::vector<bool> g_param_aligned;                 // each at a 64-byte-aligned address
unsigned g_block = 0, g_shared = 0, g_shared_attribute = 0;
std::size_t g_param_bytes[32];                     // the sizes the launch is checked with

CUresult fake_name(CUresult, const char** text) { *text = "FAKE"; return CUDA_SUCCESS; }
std::uintptr_t g_context = 0x1;                    // the context fake_context reports current
std::vector<std::pair<std::uintptr_t, std::size_t>> g_allocated;  // (context, bytes) per cuMemAlloc
std::vector<std::pair<std::uint64_t, std::size_t>> g_zeroed;      // (address, bytes) set to 0 by cuMemsetD8
CUresult fake_context(CUcontext* context) { *context = reinterpret_cast<CUcontext>(g_context); return CUDA_SUCCESS; }
CUresult fake_alloc(CUdeviceptr* address, std::size_t bytes) {
  g_allocated.emplace_back(g_context, bytes);
  *address = 0x7f0000900000 + 0x1000 * g_allocated.size();
  return CUDA_SUCCESS;
}
std::size_t g_synchronized = 0;  // cuCtxSynchronize calls: the scratch's zeros land before use
CUresult fake_memset(CUdeviceptr address, unsigned char value, std::size_t bytes) {
  if (value == 0) g_zeroed.emplace_back(address, bytes);
  return CUDA_SUCCESS;
}
CUresult fake_synchronize() { ++g_synchronized; return CUDA_SUCCESS; }
CUresult fake_device(CUdevice* device) { *device = 0; return CUDA_SUCCESS; }
CUresult fake_attribute(int* value, CUdevice_attribute attribute, CUdevice) {
  *value = attribute == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9 : 0;
  return CUDA_SUCCESS;
}
CUresult fake_load(CUmodule* module, const void*) { *module = reinterpret_cast<CUmodule>(0x2); return CUDA_SUCCESS; }
CUresult fake_function(CUfunction* function, CUmodule, const char*) {
  *function = reinterpret_cast<CUfunction>(0x3);
  return CUDA_SUCCESS;
}
CUresult fake_set_attribute(CUfunction, CUfunction_attribute, int value) {
  g_shared_attribute = unsigned(value);
  return CUDA_SUCCESS;
}
CUresult fake_launch(CUfunction, unsigned, unsigned, unsigned, unsigned block, unsigned, unsigned, unsigned shared,
                     CUstream, void** params, void**) {
  g_block = block;
  g_shared = shared;
  g_params.clear();
  g_param_aligned.clear();
  for (std::size_t index = 0; g_param_bytes[index]; ++index) {
    const auto* bytes = static_cast<const unsigned char*>(params[index]);
    g_params.emplace_back(bytes, bytes + g_param_bytes[index]);
    g_param_aligned.push_back(reinterpret_cast<std::uintptr_t>(params[index]) % 64 == 0);
  }
  return CUDA_SUCCESS;
}
CUresult fake_encode(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                     const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                     const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                     CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill fill) {
  EncodeCall call{type, rank, reinterpret_cast<std::uintptr_t>(address), {dims, dims + rank},
                  {strides, strides + rank - 1}, {box, box + rank}, {element_strides, element_strides + rank},
                  interleave, swizzle, l2, fill};
  g_encoded.push_back(call);
  // a recognisable map: every byte the call's number
  std::memset(map, int(g_encoded.size()), sizeof(CUtensorMap));
  return CUDA_SUCCESS;
}

tilebc::driver::Api fake_api() {
  tilebc::driver::Api api{};
  api.GetErrorName = fake_name;
  api.GetErrorString = fake_name;
  api.CtxGetCurrent = fake_context;
  api.CtxGetDevice = fake_device;
  api.DeviceGetAttribute = fake_attribute;
  api.ModuleLoadData = fake_load;
  api.ModuleGetFunction = fake_function;
  api.FuncSetAttribute = fake_set_attribute;
  api.LaunchKernel = fake_launch;
  api.TensorMapEncodeTiled = fake_encode;
  api.MemAlloc = fake_alloc;
  api.MemsetD8 = fake_memset;
  api.CtxSynchronize = fake_synchronize;
  return api;
}

// la_gemm_aligned_tile compiled for sm_90 with tma=True: C = relu(A @ B + bias), A [M, K], B [K, N].
constexpr std::uint64_t kA = 0x7f0000100000, kB = 0x7f0000200000, kBias = 0x7f0000300000, kC = 0x7f0000400000;

std::vector<tilebc::Arg> gemm_args(std::uint64_t a, std::int32_t k, std::int32_t lda) {
  using tilebc::DevicePtr;
  const std::int32_t m = 256, n = 64;
  return {DevicePtr{a, "f16"}, m, k, lda, std::int32_t(1), DevicePtr{kB, "f16"}, k, n, n, std::int32_t(1),
          DevicePtr{kBias, "f16"}, n, std::int32_t(1), DevicePtr{kC, "f16"}, m, n, n, std::int32_t(1)};
}

/// What tilebc_runtime.tensor_maps encode() passes for the same values (run once in Python):
/// resolve(record, values) gave dims (128, 256), strides (256,) for A and (64, 128), (128,) for B,
/// both f16, box (64, 64), swizzle 128.
void expect_gemm_encodes(const std::string& where) {
  expect(g_encoded.size() == 2, where + ": two maps encoded");
  if (g_encoded.size() != 2) return;
  const std::uint64_t addresses[2] = {kA, kB};
  const std::vector<std::uint64_t> dims[2] = {{128, 256}, {64, 128}};
  const std::vector<std::uint64_t> strides[2] = {{256}, {128}};
  for (int index = 0; index < 2; ++index) {
    const EncodeCall& call = g_encoded[index];
    const std::string map = where + ": map " + std::to_string(index);
    expect(call.type == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 && call.rank == 2, map + " f16, rank 2");
    expect(call.address == addresses[index], map + " address");
    expect(call.dims == dims[index], map + " dims innermost first");
    expect(call.strides == strides[index], map + " byte strides");
    expect((call.box == std::vector<std::uint32_t>{64, 64}), map + " box");
    expect((call.element_strides == std::vector<std::uint32_t>{1, 1}), map + " element strides");
    expect(call.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && call.swizzle == CU_TENSOR_MAP_SWIZZLE_128B &&
               call.l2 == CU_TENSOR_MAP_L2_PROMOTION_L2_128B && call.fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
           map + " interleave, swizzle, L2 promotion, OOB fill");
  }
}

void tma_tests(const std::string& fatbin, const std::string& cache_root, const std::string& key) {
  const tilebc::driver::Api api = fake_api();
  tilebc::driver::set_api_for_testing(&api);
  const auto module = tilebc::Module::load(fatbin);
  const auto kernel = module.function(module.entries().at(0).name);
  const std::string& name = kernel.name();
  // 18 parameters of 8 or 4 bytes, then the two 128-byte maps
  std::size_t index = 0;
  for (const auto& param : kernel.entry().params) g_param_bytes[index++] = param.size;
  g_param_bytes[index++] = 128;
  g_param_bytes[index++] = 128;
  g_param_bytes[index] = 0;

  const auto image = kernel.image("sm_90");
  expect(image.tensor_maps.size() == 2 && image.tensor_maps[0].array == 0 && image.tensor_maps[1].array == 5,
         "fatbin image lists the maps of arrays 0 and 5");
  kernel.launch_args(tilebc::Dim3(4, 1), gemm_args(kA, 128, 128));
  expect_gemm_encodes("fatbin launch");
  // two 24 KiB TMA stages and the slack that aligns them to 1024 bytes
  expect(g_block == 128 && g_shared == 50160 && g_shared_attribute == 50160, "fatbin launch facts");
  expect(g_params.size() == 20, "20 kernel parameters");
  if (g_params.size() == 20) {
    expect(g_params[18] == std::vector<unsigned char>(128, 1) && g_params[19] == std::vector<unsigned char>(128, 2),
           "the encoded maps follow the kernel's parameters, in record order");
    expect(g_param_aligned[18] && g_param_aligned[19], "maps are 64-byte aligned");
    std::uint64_t k = 0;
    std::memcpy(&k, g_params[2].data(), 4);
    expect(k == 128, "the kernel's own parameters are unchanged");
  }

  // Where TMA cannot encode the launch's arrays, the entry, map and argument are named.
  const std::string map0 = "'" + name + "' tensor map " + name + "_tmap_0 (argument 0): ";
  g_encoded.clear();
  expect_error("unaligned base", tilebc::Errc::argument_mismatch,
               map0 + "base address 0x7f0000100008 is not 16-byte aligned",
               [&] { kernel.launch_args(tilebc::Dim3(1), gemm_args(kA + 8, 128, 128)); });
  expect_error("negative extent", tilebc::Errc::argument_mismatch, map0 + "extents (-64, 256): TMA needs",
               [&] { kernel.launch_args(tilebc::Dim3(1), gemm_args(kA, -64, 128)); });
  expect_error("unaligned stride", tilebc::Errc::argument_mismatch,
               map0 + "strides (100) of 2-byte elements: TMA needs byte strides that are positive multiples of 16",
               [&] { kernel.launch_args(tilebc::Dim3(1), gemm_args(kA, 128, 100)); });
  expect_error("negative stride", tilebc::Errc::argument_mismatch, map0 + "strides (-128) of 2-byte",
               [&] { kernel.launch_args(tilebc::Dim3(1), gemm_args(kA, 128, -128)); });
  expect(g_encoded.empty(), "nothing encoded for refused launches");

  // K = 0 (an empty batch): both maps are over empty arrays, so they are encoded over the
  // context's zeroed scratch, extents 1 and strides 16; the scratch is made once per context.
  for (std::uintptr_t context : {0x1, 0x1, 0x5}) {
    g_context = context;
    kernel.launch_args(tilebc::Dim3(4, 1), gemm_args(kA + 8, 0, 7));  // base and strides unread
  }
  g_context = 0x1;
  const std::uint64_t first = 0x7f0000901000, second = 0x7f0000902000;
  expect((g_allocated == std::vector<std::pair<std::uintptr_t, std::size_t>>{{0x1, 256}, {0x5, 256}}),
         "one 256-byte scratch per context");
  expect((g_zeroed == std::vector<std::pair<std::uint64_t, std::size_t>>{{first, 256}, {second, 256}}),
         "each scratch zeroed once, whole");
  expect(g_synchronized == 2, "each scratch's zeroing waited for before its first launch");
  expect(g_encoded.size() == 6, "K = 0: two maps per launch encoded");
  for (std::size_t index = 0; index < g_encoded.size(); ++index) {
    const EncodeCall& call = g_encoded[index];
    const std::string map = "K = 0 map " + std::to_string(index);
    expect(call.address == (index < 4 ? first : second), map + " over the context's scratch");
    expect((call.dims == std::vector<std::uint64_t>{1, 1}) && (call.strides == std::vector<std::uint64_t>{16}),
           map + " extents 1, strides 16");
    expect((call.box == std::vector<std::uint32_t>{64, 64}) && call.swizzle == CU_TENSOR_MAP_SWIZZLE_128B &&
               call.type == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 && call.fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
           map + " keeps its element type, box, swizzle and zero fill");
  }
  g_encoded.clear();

  // A driver older than CUDA 12.0 has no cuTensorMapEncodeTiled.
  tilebc::driver::Api old = api;
  old.TensorMapEncodeTiled = nullptr;
  tilebc::driver::set_api_for_testing(&old);
  expect_error("no encoder", tilebc::Errc::driver_unavailable, "the CUDA driver lacks cuTensorMapEncodeTiled",
               [&] { kernel.launch_args(tilebc::Dim3(1), gemm_args(kA, 128, 128)); });
  tilebc::driver::set_api_for_testing(&api);

  // The same kernel's cache entry (tilebc compile --emit cubin --tma) records the same maps.
  const auto hit = tilebc::cache_lookup(cache_root, key);
  expect(hit.has_value(), "cache entry " + key + " is a hit");
  if (hit) {
    expect(hit->tensor_maps.size() == 2, "cache entry lists two maps");
    for (std::size_t map = 0; map < hit->tensor_maps.size() && map < image.tensor_maps.size(); ++map) {
      const auto& a = hit->tensor_maps[map];
      const auto& b = image.tensor_maps[map];
      expect(a.param == b.param && a.array == b.array && a.element == b.element && a.box == b.box &&
                 a.swizzle == b.swizzle && a.dims.size() == b.dims.size() && a.strides.size() == b.strides.size(),
             "cache and fatbin maps agree");
      for (std::size_t dim = 0; dim < a.dims.size() && dim < b.dims.size(); ++dim)
        expect(a.dims[dim].from_param == b.dims[dim].from_param && a.dims[dim].value == b.dims[dim].value,
               "cache and fatbin dims agree");
    }
  }
  tilebc::driver::set_api_for_testing(nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: tilebc_cpp_tests FIXTURES_DIR\n";
    return 2;
  }
  const std::string fixtures = argv[1];
  // No driver on test machines; this path also makes the test independent of one being present.
  setenv("TILEBC_LIBCUDA", "/nonexistent/libcuda.so.1", 1);

  // SHA-256 (FIPS 180-4 examples).
  expect(tilebc::sha256_hex("", 0) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "sha256('')");
  expect(tilebc::sha256_hex("abc", 3) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "sha256('abc')");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  expect(tilebc::sha256_hex(two_blocks.data(), two_blocks.size()) ==
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1", "sha256(448 bits)");
  tilebc::Sha256 million;
  const std::string a1000(1000, 'a');
  for (int index = 0; index < 1000; ++index) million.update(a1000);
  expect(million.hexdigest() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", "sha256(a*1e6)");

  // Entry of scalar_params: (ptr<f32>, i32, i32, f32, f64, i64, i16, i8, i1).
  const auto module = tilebc::Module::load(fixtures + "/bytecode/scalar_params/scalar_params-13.5.tilebc");
  expect(module.entries().size() == 1, "scalar_params has one entry");
  const auto kernel = module.function(module.entries().at(0).name);
  const auto& entry = kernel.entry();
  expect(entry.params.size() == 9, "scalar_params has 9 parameters");
  float* data = nullptr;
  auto good = [&] {
    return std::vector<tilebc::Arg>{data, std::int32_t(1), std::int32_t(2), 1.5f, 2.5, std::int64_t(3),
                                    std::int16_t(4), std::int8_t(5), true};
  };
  tilebc::check_arguments(entry, good());  // accepted
  expect_error("too few", tilebc::Errc::argument_mismatch, "'" + entry.name + "' takes 9 arguments (", [&] {
    auto args = good();
    args.pop_back();
    tilebc::check_arguments(entry, args);
  });
  expect_error("int for pointer", tilebc::Errc::argument_mismatch,
               "argument 0 of '" + entry.name + "' must be a pointer to f32 (tile<ptr<f32>>), got int32_t", [&] {
                 auto args = good();
                 args[0] = std::int32_t(7);
                 tilebc::check_arguments(entry, args);
               });
  expect_error("wrong pointee", tilebc::Errc::argument_mismatch,
               "argument 0 of '" + entry.name + "' must be a pointer to f32 (tile<ptr<f32>>), got a pointer to i32", [&] {
                 auto args = good();
                 args[0] = static_cast<std::int32_t*>(nullptr);
                 tilebc::check_arguments(entry, args);
               });
  expect_error("i64 for i32", tilebc::Errc::argument_mismatch,
               "argument 1 of '" + entry.name + "' must be a 32-bit integer (tile<i32>), got int64_t (64-bit integer)", [&] {
                 auto args = good();
                 args[1] = std::int64_t(1);
                 tilebc::check_arguments(entry, args);
               });
  expect_error("double for f32", tilebc::Errc::argument_mismatch,
               "argument 3 of '" + entry.name + "' must be a 32-bit float f32 (tile<f32>), got double (64-bit float)", [&] {
                 auto args = good();
                 args[3] = 1.0;
                 tilebc::check_arguments(entry, args);
               });
  expect_error("float for i64", tilebc::Errc::argument_mismatch,
               "argument 5 of '" + entry.name + "' must be a 64-bit integer (tile<i64>)", [&] {
                 auto args = good();
                 args[5] = 1.0f;
                 tilebc::check_arguments(entry, args);
               });
  expect_error("int8 for i1", tilebc::Errc::argument_mismatch,
               "argument 8 of '" + entry.name + "' must be a 1-bit integer (tile<i1>), got int8_t (8-bit integer)", [&] {
                 auto args = good();
                 args[8] = std::int8_t(1);
                 tilebc::check_arguments(entry, args);
               });
  {
    auto args = good();
    args[0] = tilebc::DevicePtr{0x1000};        // untyped device address: accepted
    args[1] = std::uint32_t(9);                 // signless: unsigned of the right width is fine
    tilebc::check_arguments(entry, args);
    expect(args[1].storage == 9, "uint32 stored");
  }
  // Mismatches are reported before the (absent) driver is opened.
  expect_error("launch mismatch first", tilebc::Errc::argument_mismatch, "'" + entry.name + "' takes 9 arguments",
               [&] { kernel.launch(tilebc::Dim3(1), data, std::int32_t(1)); });
  expect_error("stream last", tilebc::Errc::argument_mismatch, "the stream must be the last launch argument",
               [&] { kernel.launch(tilebc::Dim3(1), tilebc::Stream{}, data); });
  // A correct launch without a driver says what to install.
  expect_error("no driver", tilebc::Errc::driver_unavailable,
               "cannot open the CUDA driver library /nonexistent/libcuda.so.1", [&] {
                 kernel.launch(tilebc::Dim3(4), data, std::int32_t(1), std::int32_t(2), 1.5f, 2.5, std::int64_t(3),
                               std::int16_t(4), std::int8_t(5), true, tilebc::Stream{});
               });
  expect_error("unknown entry", tilebc::Errc::not_found, "no entry named 'nope' (entries: " + entry.name,
               [&] { module.function("nope"); });
  expect_error("missing file", tilebc::Errc::io, "cannot read file", [&] {
    tilebc::Module::load(fixtures + "/no/such.tilebc");
  });

  // A deviation NVIDIA's reader accepts (a function flag bit before 13.4): read with a warning by
  // default, refused when strict; the name and signature are what the unchanged file gives.
  {
    std::vector<std::uint8_t> bytes = tilebc::read_file(fixtures + "/bytecode/scalar_params/scalar_params-13.1.tilebc");
    const tilebc::Entry original = tilebc::Module::load(bytes).entries().at(0);
    const std::uint64_t flags_at = original.offset + 2;  // after one-byte name and signature indices
    expect(bytes[original.offset] < 0x80 && bytes[original.offset + 1] < 0x80, "one-byte indices");
    bytes[flags_at] |= 0x40;
    const tilebc::Module lenient = tilebc::Module::load(bytes);
    expect(lenient.entries().at(0).signature == original.signature, "lenient signature");
    expect(lenient.warnings().size() == 1, "one warning");
    if (lenient.warnings().size() == 1) {
      expect(lenient.warnings()[0].offset == flags_at, "warning offset");
      expect(lenient.warnings()[0].message.rfind("function '" + original.name + "' has unknown flags 0x4", 0) == 0,
             "warning message: " + lenient.warnings()[0].message);
    }
    tilebc::Options strict;
    strict.strict = true;
    expect_error("strict flags", tilebc::Errc::malformed, "function '" + original.name + "' has unknown flags 0x4",
                 [&] { tilebc::Module::load(bytes, strict); });
  }

  // Error text: "FILE: offset 0x..: message".
  const tilebc::Error located(tilebc::Errc::malformed, "bad thing", "k.tilebc", 0x1a3);
  expect(std::string(located.what()) == "k.tilebc: offset 0x1a3: bad thing", "error what()");
  expect(located.code() == tilebc::make_error_code(tilebc::Errc::malformed), "error_code");

  if (argc >= 5) tma_tests(argv[2], argv[3], argv[4]);

  std::cout << g_checks << " checks, " << g_failures << " failures\n";
  return g_failures ? 1 : 0;
}
