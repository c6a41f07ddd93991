// C++ unit tests that need no GPU: argument checking, launch refusing before the driver, the
// no-driver message, SHA-256 vectors and error formatting. Run: tilebc_cpp_tests FIXTURES_DIR
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

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

  std::cout << g_checks << " checks, " << g_failures << " failures\n";
  return g_failures ? 1 : 0;
}
