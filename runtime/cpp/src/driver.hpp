// The CUDA driver API, opened with dlopen on first use (no link-time dependency on libcuda).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace tilebc {
namespace driver {

struct Api {
  CUresult (*Init)(unsigned int);
  CUresult (*GetErrorName)(CUresult, const char**);
  CUresult (*GetErrorString)(CUresult, const char**);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*DeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*CtxGetCurrent)(CUcontext*);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*CtxGetDevice)(CUdevice*);
  CUresult (*ModuleLoadData)(CUmodule*, const void*);
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*FuncGetAttribute)(int*, CUfunction_attribute, CUfunction);
  CUresult (*FuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void**, void**);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*MemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*CtxSynchronize)();
  // CUDA 12.0+; null on older drivers, which then cannot launch TMA kernels (tensor_map_encoder)
  CUresult (*TensorMapEncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                   CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                   CUtensorMapFloatOOBfill);
};

/// The driver, opened and initialised once (thread-safe). Throws Errc::driver_unavailable with
/// what to install when libcuda cannot be opened, lacks a symbol, or cuInit fails.
const Api& api();

/// Tests only: use `table` instead of libcuda from now on (null: back to libcuda).
void set_api_for_testing(const Api* table);

/// The driver's cuTensorMapEncodeTiled; throws Errc::driver_unavailable naming it when the
/// driver lacks it (older than CUDA 12.0).
decltype(Api::TensorMapEncodeTiled) tensor_map_encoder();

/// A zeroed device buffer of `bytes` (16-byte aligned) in the current context, allocated and
/// zeroed on first use per context and kept for the process: TMA maps over empty arrays are
/// encoded over it (tensor_map.hpp over_zeros). Thread-safe; later calls must not ask for more.
std::uint64_t zero_scratch(std::size_t bytes);

/// Throw Errc::driver_error naming `call` and the result's name and description.
void check(CUresult result, const char* call);

/// Make sure a context is current (the device's primary context when none is) and return its device.
CUdevice current_device();

}  // namespace driver
}  // namespace tilebc
