// Load a Tile IR bytecode file (or an AOT fatbin), print its entries, and launch one of them.
//
//   launch_fixture FILE                 list the entries and their parameters
//   launch_fixture FILE ENTRY N         launch ENTRY with one N-element buffer per pointer
//                                       parameter; 32-bit integers after a pointer are its
//                                       shape (N) and stride (1), cuTile's array convention
//
// Only the launch needs a GPU. The cubin comes from the fatbin, the shared cache, or
// `tilebc compile` (see tilebc/loader.hpp); the driver is opened by the loader, so this program
// links nothing from CUDA.
#include <iostream>
#include <memory>
#include <vector>

#include "tilebc/loader.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: launch_fixture FILE [ENTRY N]\n";
    return 2;
  }
  try {
    const auto module = tilebc::Module::load(argv[1]);
    std::cout << argv[1] << ": bytecode " << module.version().str() << ", " << module.entries().size()
              << (module.entries().size() == 1 ? " entry" : " entries") << "\n";
    for (const auto& entry : module.entries()) {
      std::cout << "  " << entry.name << " " << entry.signature << "\n";
      for (const auto& param : entry.params)
        std::cout << "    " << param.type << ": " << tilebc::to_string(param.kind) << ", " << param.size
                  << " bytes\n";
    }
    if (argc < 4) return 0;

    const auto function = module.function(argv[2]);
    const std::int32_t count = std::stoi(argv[3]);
    std::vector<tilebc::Arg> args;
    std::vector<std::unique_ptr<tilebc::DeviceBuffer>> buffers;
    int after_pointer = 0;  // integers seen since the last pointer: shape first, then stride
    for (const auto& param : function.entry().params) {
      if (param.kind == tilebc::ParamKind::pointer) {
        buffers.push_back(std::make_unique<tilebc::DeviceBuffer>(std::size_t(count) * 8));
        std::vector<std::uint8_t> zeros(std::size_t(count) * 8, 0);
        buffers.back()->upload(zeros.data(), zeros.size());
        args.emplace_back(buffers.back()->ptr(param.element.c_str()));
        after_pointer = 0;
      } else if (param.kind == tilebc::ParamKind::integer && param.bits == 32) {
        args.emplace_back(std::int32_t(after_pointer++ == 0 ? count : 1));
      } else {
        std::cerr << "parameter " << param.type << " is not handled by this example\n";
        return 2;
      }
    }
    function.launch_args(tilebc::Dim3(static_cast<unsigned>((count + 127) / 128)), args);
    tilebc::synchronize();
    std::cout << "launched " << function.name() << " on " << function.image().arch << "\n";
  } catch (const tilebc::Error& error) {
    std::cerr << "error: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
