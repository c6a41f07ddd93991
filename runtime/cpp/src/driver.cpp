#include "driver.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "tilebc/error.hpp"

namespace tilebc {
namespace driver {
namespace {

std::once_flag g_once;
Api g_api;
const Api* g_substitute = nullptr;  // set_api_for_testing
std::string g_failure;  // set when opening failed: every later call reports the same reason
std::mutex g_scratch_mutex;
std::map<CUcontext, CUdeviceptr> g_scratch;  // zero_scratch, per context, never freed

template <class F>
void bind(void* library, F& slot, const char* symbol, std::string& missing) {
  slot = reinterpret_cast<F>(dlsym(library, symbol));
  if (!slot) missing += std::string(missing.empty() ? "" : ", ") + symbol;
}

void open_driver() {
  const char* configured = std::getenv("TILEBC_LIBCUDA");
  const std::string path = configured && *configured ? configured : "libcuda.so.1";
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* reason = dlerror();
    g_failure = "cannot open the CUDA driver library " + path + " (" + (reason ? reason : "unknown") +
                "); install the NVIDIA driver (it provides libcuda.so.1), or set TILEBC_LIBCUDA to its path";
    return;
  }
  std::string missing;
  // Unversioned names are the original ABI of each call; cuda.h's macros (e.g. _v2) do not apply
  // to dlsym. cuDevicePrimaryCtxRetain and the others below kept one version since CUDA 7.
  bind(library, g_api.Init, "cuInit", missing);
  bind(library, g_api.GetErrorName, "cuGetErrorName", missing);
  bind(library, g_api.GetErrorString, "cuGetErrorString", missing);
  bind(library, g_api.DeviceGet, "cuDeviceGet", missing);
  bind(library, g_api.DeviceGetAttribute, "cuDeviceGetAttribute", missing);
  bind(library, g_api.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", missing);
  bind(library, g_api.CtxGetCurrent, "cuCtxGetCurrent", missing);
  bind(library, g_api.CtxSetCurrent, "cuCtxSetCurrent", missing);
  bind(library, g_api.CtxGetDevice, "cuCtxGetDevice", missing);
  bind(library, g_api.ModuleLoadData, "cuModuleLoadData", missing);
  bind(library, g_api.ModuleGetFunction, "cuModuleGetFunction", missing);
  bind(library, g_api.FuncGetAttribute, "cuFuncGetAttribute", missing);
  bind(library, g_api.FuncSetAttribute, "cuFuncSetAttribute", missing);
  bind(library, g_api.LaunchKernel, "cuLaunchKernel", missing);
  // cuda.h maps these names to their _v2 (64-bit size) versions.
  bind(library, g_api.MemAlloc, "cuMemAlloc_v2", missing);
  bind(library, g_api.MemFree, "cuMemFree_v2", missing);
  bind(library, g_api.MemcpyHtoD, "cuMemcpyHtoD_v2", missing);
  bind(library, g_api.MemcpyDtoH, "cuMemcpyDtoH_v2", missing);
  bind(library, g_api.MemsetD8, "cuMemsetD8_v2", missing);
  bind(library, g_api.CtxSynchronize, "cuCtxSynchronize", missing);
  // optional: only TMA kernels need it (tensor_map_encoder names it when absent)
  g_api.TensorMapEncodeTiled = reinterpret_cast<decltype(g_api.TensorMapEncodeTiled)>(
      dlsym(library, "cuTensorMapEncodeTiled"));
  if (!missing.empty()) {
    g_failure = path + " lacks " + missing + "; the NVIDIA driver is too old or this is not libcuda";
    return;
  }
  const CUresult result = g_api.Init(0);
  if (result != CUDA_SUCCESS) {
    const char* name = nullptr;
    g_api.GetErrorName(result, &name);
    g_failure = std::string("cuInit failed (") + (name ? name : "unknown") + ", " +
                std::to_string(int(result)) + "): no usable CUDA device or driver";
  }
}

}  // namespace

void set_api_for_testing(const Api* table) {
  std::lock_guard<std::mutex> lock(g_scratch_mutex);
  g_substitute = table;
  g_scratch.clear();  // the buffers belonged to the previous table's contexts
}

const Api& api() {
  if (g_substitute) return *g_substitute;
  std::call_once(g_once, open_driver);
  if (!g_failure.empty()) throw Error(Errc::driver_unavailable, g_failure);
  return g_api;
}

decltype(Api::TensorMapEncodeTiled) tensor_map_encoder() {
  const Api& cuda = api();
  if (!cuda.TensorMapEncodeTiled)
    throw Error(Errc::driver_unavailable,
                "the CUDA driver lacks cuTensorMapEncodeTiled, which TMA kernels (the JIT's sm_90 default) "
                "need; install an NVIDIA driver for CUDA 12.0 or newer");
  return cuda.TensorMapEncodeTiled;
}

void check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  api().GetErrorName(result, &name);
  api().GetErrorString(result, &text);
  throw Error(Errc::driver_error, std::string(call) + " failed: " + (name ? name : "unknown") + " (" +
                                      std::to_string(int(result)) + ")" + (text ? std::string(": ") + text : ""));
}

CUdevice current_device() {
  const Api& cuda = api();
  CUcontext context = nullptr;
  check(cuda.CtxGetCurrent(&context), "cuCtxGetCurrent");
  CUdevice device = 0;
  if (context) {
    check(cuda.CtxGetDevice(&device), "cuCtxGetDevice");
    return device;
  }
  check(cuda.DeviceGet(&device, 0), "cuDeviceGet");
  check(cuda.DevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  check(cuda.CtxSetCurrent(context), "cuCtxSetCurrent");
  return device;
}

std::uint64_t zero_scratch(std::size_t bytes) {
  current_device();
  const Api& cuda = api();
  CUcontext context = nullptr;
  check(cuda.CtxGetCurrent(&context), "cuCtxGetCurrent");
  std::lock_guard<std::mutex> lock(g_scratch_mutex);
  auto found = g_scratch.find(context);
  if (found != g_scratch.end()) return found->second;
  CUdeviceptr address = 0;
  check(cuda.MemAlloc(&address, bytes), "cuMemAlloc(TMA zero scratch)");
  // cuMemsetD8 may return before the zeros land (and runs on the legacy stream, which a
  // non-blocking stream does not wait for): synchronize before any launch can read them
  CUresult zeroed = cuda.MemsetD8(address, 0, bytes);
  if (zeroed == CUDA_SUCCESS) zeroed = cuda.CtxSynchronize();
  if (zeroed != CUDA_SUCCESS) {
    cuda.MemFree(address);
    check(zeroed, "cuMemsetD8(TMA zero scratch)");
  }
  g_scratch[context] = address;
  return address;
}

}  // namespace driver
}  // namespace tilebc
