// Run the la_gemm_aligned_tile fixture, C = relu(A @ B + bias) in f16, on the GPU and compare its
// output exactly with a reference computed here.
//
//   gemm_fixture FILE M N K     FILE: the fixture's bytecode, or an AOT fatbin of it; K may be 0
//
// A [M,K], B [K,N], bias [N] and C [M,N] are contiguous f16 arrays, each passed as cuTile does:
// base pointer, then its shape, then its strides (32-bit). The fixture is specialized for shapes
// and outer strides that are multiples of 16 (it assumes so), with 64x128 output tiles on a 1-D
// grid; M, N and K need not be multiples of the tiles (loads are zero padded).
//
// Inputs are multiples of 1/4 in [-1/2, 1/2]: every f16 product is a multiple of 1/16, so the
// f32 accumulator is exact in any order and the only rounding is the final cast to f16, which
// the reference repeats. Any difference is therefore a bug, not a tolerance question.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tilebc/loader.hpp"

namespace {

constexpr unsigned kTileM = 64;   // the fixture's TM and TN (its entry name ends _I64_I128_I64_I8)
constexpr unsigned kTileN = 128;

// -1/2, -1/4, 0, 1/4, 1/2 as f16 bit patterns (exact, so no encoder is needed)
constexpr std::uint16_t kQuarterBits[5] = {0xB800, 0xB400, 0x0000, 0x3400, 0x3800};

// A deterministic, irregular choice of quarter (-2..2) per element, so a transposed or shifted
// operand gives a different product.
int quarter(std::int64_t i, std::int64_t j, int salt) {
  return int((i * 131 + j * 73 + (i * j + salt) % 7) % 5) - 2;
}

double half_value(std::uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(mantissa, -24);  // subnormal
  else if (exponent == 31)
    magnitude = mantissa ? NAN : INFINITY;
  else
    magnitude = std::ldexp(mantissa | 0x400, exponent - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}

// Round to the nearest f16 value, ties to even (the kernel's f32 -> f16 cast).
double round_to_half(double x) {
  if (x == 0) return x;
  int exponent;
  std::frexp(x, &exponent);                          // |x| in [2^(exponent-1), 2^exponent)
  const int lead = std::max(exponent - 1, -14);      // below 2^-14 the spacing stays 2^-24
  const double ulp = std::ldexp(1.0, lead - 10);
  const double rounded = std::nearbyint(x / ulp) * ulp;  // default rounding mode: ties to even
  return std::fabs(rounded) > 65504 ? std::copysign(INFINITY, x) : rounded;
}

std::int32_t size_argument(const char* text, long smallest = 16) {
  std::size_t used = 0;
  const long value = std::stol(text, &used);
  // the kernel assumes multiples of 16; 2^15 keeps every index and stride in 32 bits
  if (used != std::string(text).size() || value < smallest || value > (1 << 15) || value % 16 != 0)
    throw std::invalid_argument(text);
  return std::int32_t(value);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: gemm_fixture FILE_OR_FATBIN M N K   (M, N, K: multiples of 16; K may be 0)\n";
    return 2;
  }
  std::int32_t M, N, K;
  try {
    M = size_argument(argv[2]);
    N = size_argument(argv[3]);
    K = size_argument(argv[4], 0);  // K = 0: empty A and B, C = relu(bias) (TMA maps over zeros)
  } catch (const std::exception&) {
    std::cerr << "error: M, N and K must be multiples of 16 from 16 to 32768 (K also 0)\n";
    return 2;
  }
  try {
    const auto module = tilebc::Module::load(argv[1]);
    if (module.entries().size() != 1) {
      std::cerr << "error: " << argv[1] << " has " << module.entries().size() << " entries, expected one\n";
      return 1;
    }
    const auto function = module.function(module.entries()[0].name);
    // pointer, shape..., strides... per array (row-major, unit inner stride)
    const auto arguments = [&](tilebc::DevicePtr a, tilebc::DevicePtr b, tilebc::DevicePtr bias,
                               tilebc::DevicePtr c) {
      return std::vector<tilebc::Arg>{a, M, K, K, 1, b, K, N, N, 1, bias, N, 1, c, M, N, N, 1};
    };
    // Check the entry's parameter list before the driver is opened, so another kernel is refused
    // on any machine.
    const tilebc::DevicePtr none{0, "f16"};
    tilebc::check_arguments(function.entry(), arguments(none, none, none, none));

    // quarters (-2..2) of each input, kept for the reference, and their f16 bits for the device
    std::vector<int> qa(std::size_t(M) * K), qb(std::size_t(K) * N), qbias(N);
    for (std::int32_t i = 0; i < M; ++i)
      for (std::int32_t k = 0; k < K; ++k) qa[std::size_t(i) * K + k] = quarter(i, k, 1);
    for (std::int32_t k = 0; k < K; ++k)
      for (std::int32_t j = 0; j < N; ++j) qb[std::size_t(k) * N + j] = quarter(k, j, 4);
    for (std::int32_t j = 0; j < N; ++j) qbias[j] = quarter(j, 0, 2);
    const auto to_half = [](const std::vector<int>& q) {
      std::vector<std::uint16_t> bits(q.size());
      for (std::size_t n = 0; n < q.size(); ++n) bits[n] = kQuarterBits[q[n] + 2];
      return bits;
    };
    const auto a = to_half(qa), b = to_half(qb), bias = to_half(qbias);
    // NaN everywhere, so an output element the kernel never stores cannot match
    std::vector<std::uint16_t> c(std::size_t(M) * N, 0x7E00);

    // Device memory opens the driver: without one, this is where a tilebc::Error comes from.
    tilebc::DeviceBuffer da(a.size() * 2), db(b.size() * 2), dbias(bias.size() * 2), dc(c.size() * 2);
    if (K) {  // nothing to copy into the empty A and B
      da.upload(a.data(), a.size() * 2);
      db.upload(b.data(), b.size() * 2);
    }
    dbias.upload(bias.data(), bias.size() * 2);
    dc.upload(c.data(), c.size() * 2);

    const unsigned blocks = ((unsigned(M) + kTileM - 1) / kTileM) * ((unsigned(N) + kTileN - 1) / kTileN);
    function.launch_args(tilebc::Dim3(blocks),
                         arguments(da.ptr("f16"), db.ptr("f16"), dbias.ptr("f16"), dc.ptr("f16")));
    tilebc::synchronize();
    dc.download(c.data(), c.size() * 2);

    // The reference in integers, in units of 1/16 (a product of two quarters): exact like the
    // kernel's f32 sums. Row by row, k outside j, so that B is read in order.
    std::vector<std::int64_t> row(N);
    for (std::int32_t i = 0; i < M; ++i) {
      for (std::int32_t j = 0; j < N; ++j) row[j] = 4 * qbias[j];
      for (std::int32_t k = 0; k < K; ++k) {
        const int x = qa[std::size_t(i) * K + k];
        const int* y = &qb[std::size_t(k) * N];
        for (std::int32_t j = 0; j < N; ++j) row[j] += x * y[j];
      }
      for (std::int32_t j = 0; j < N; ++j) {
        const double expected = round_to_half(std::max(double(row[j]) / 16, 0.0));
        const double got = half_value(c[std::size_t(i) * N + j]);
        if (!(got == expected)) {  // NaN compares unequal; -0 equals 0, which relu may give
          std::cerr << "mismatch at C[" << i << "][" << j << "]: got " << got << ", expected " << expected
                    << " (" << M << " " << N << " " << K << ")\n";
          return 1;
        }
      }
    }
    std::cout << "ok " << M << " " << N << " " << K << " on " << tilebc::current_device_arch() << "\n";
  } catch (const tilebc::Error& error) {
    std::cerr << "error: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
