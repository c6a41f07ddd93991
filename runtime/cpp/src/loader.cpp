#include "tilebc/loader.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "driver.hpp"
#include "tilebc/json.hpp"

extern char** environ;

namespace tilebc {

// ---- argument checking -------------------------------------------------------------------------

const char* cpp_type_name(std::size_t size, bool is_signed, bool is_float, bool is_bool) {
  if (is_bool) return "bool";
  if (is_float) return size == 4 ? "float" : "double";
  switch (size) {
    case 1: return is_signed ? "int8_t" : "uint8_t";
    case 2: return is_signed ? "int16_t" : "uint16_t";
    case 4: return is_signed ? "int32_t" : "uint32_t";
    default: return is_signed ? "int64_t" : "uint64_t";
  }
}

Arg Arg::make(ParamKind kind, unsigned bits, const char* element, const char* description,
              const void* bytes, unsigned size) {
  Arg arg;
  arg.kind = kind;
  arg.bits = bits;
  arg.element = element ? element : "";
  arg.description = description;
  if (kind == ParamKind::pointer)
    arg.description = arg.element.empty() ? std::string(description) : "a pointer to " + arg.element;
  std::memcpy(&arg.storage, bytes, size);
  return arg;
}

namespace {

std::string expected_text(const Param& param) {
  switch (param.kind) {
    case ParamKind::pointer: return "a pointer to " + param.element + " (" + param.type + ")";
    case ParamKind::integer:
      return "a " + std::to_string(param.bits) + "-bit integer (" + param.type + ")";
    case ParamKind::floating:
      return "a " + std::to_string(param.bits) + "-bit float " + param.element + " (" + param.type + ")";
    case ParamKind::unsupported: break;
  }
  return param.type;
}

std::string got_text(const Arg& arg) {
  if (arg.kind == ParamKind::pointer) return arg.description;
  return arg.description + " (" + std::to_string(arg.bits) + "-bit " +
         (arg.kind == ParamKind::floating ? "float" : "integer") + ")";
}

[[noreturn]] void mismatch(const std::string& message) {
  throw Error(Errc::argument_mismatch, message);
}

}  // namespace

void check_arguments(const Entry& entry, const std::vector<Arg>& args) {
  const std::string who = "'" + entry.name + "'";
  if (args.size() != entry.params.size())
    mismatch(who + " takes " + std::to_string(entry.params.size()) + " arguments " + entry.signature +
             ", got " + std::to_string(args.size()));
  for (std::size_t index = 0; index < args.size(); ++index) {
    const Param& param = entry.params[index];
    const Arg& arg = args[index];
    const std::string where = "argument " + std::to_string(index) + " of " + who;
    if (param.kind == ParamKind::unsupported)
      mismatch("parameter " + std::to_string(index) + " of " + who + " has type " + param.type +
               ", which cannot be passed from the host");
    if (arg.kind != param.kind)
      mismatch(where + " must be " + expected_text(param) + ", got " + got_text(arg));
    switch (param.kind) {
      case ParamKind::pointer:
        if (!arg.element.empty() && arg.element != param.element)
          mismatch(where + " must be " + expected_text(param) + ", got " + got_text(arg));
        break;
      case ParamKind::integer:
        if (arg.bits != param.bits)
          mismatch(where + " must be " + expected_text(param) + ", got " + got_text(arg));
        break;
      case ParamKind::floating: {
        // tf32 scalars travel as 32-bit floats.
        const bool tf32_from_f32 = param.element == "tf32" && arg.element == "f32";
        if (!tf32_from_f32 && (arg.bits != param.bits || arg.element != param.element))
          mismatch(where + " must be " + expected_text(param) + ", got " + got_text(arg));
        break;
      }
      case ParamKind::unsupported: break;
    }
  }
}

// ---- module state ------------------------------------------------------------------------------

struct ModuleState {
  std::string name;                 // file path, or a label for in-memory input
  bool from_file = false;
  std::vector<std::uint8_t> bytes;  // bytecode, or the fatbin
  Options options;
  BytecodeInfo info;                // bytecode modules
  bool fatbin = false;
  AotMetadata aot;                  // fatbin modules

  std::mutex mutex;                          // guards the maps below
  std::map<std::string, Image> images;       // "entry@arch" (fatbin: "@arch")
  std::map<std::string, CUmodule> modules;   // same keys, per loaded image
  std::map<std::string, std::pair<CUfunction, unsigned>> functions;  // "entry@arch" -> (fn, threads)

  const std::vector<Entry>& entries() const { return fatbin ? aot.entries : info.entries; }
};

namespace {

std::string arch_name(int major, int minor) { return "sm_" + std::to_string(major * 10 + minor); }

bool is_executable(const std::string& path) {
  struct stat status {};
  return ::stat(path.c_str(), &status) == 0 && S_ISREG(status.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::stringstream stream(path);
  std::string directory;
  while (std::getline(stream, directory, ':')) {
    const std::string candidate = (directory.empty() ? "." : directory) + "/" + program;
    if (is_executable(candidate)) return candidate;
  }
  return "";
}

/// The command prefix that runs `tilebc` (argv), or empty when the Python runtime is not found.
std::vector<std::string> compiler_command(const Options& options, std::string& tried) {
  std::string configured = options.compiler;
  if (configured.empty())
    if (const char* env = std::getenv("TILEBC_COMPILER")) configured = env;
  if (!configured.empty()) {
    tried = "the configured compiler " + configured;
    const std::string found = configured.find('/') == std::string::npos ? find_on_path(configured) : configured;
    if (!found.empty() && is_executable(found)) return {found};
    return {};
  }
  const char* python = std::getenv("TILEBC_PYTHON");
  if (python && *python) {
    tried = "TILEBC_PYTHON=" + std::string(python);
    const std::string found = std::strchr(python, '/') ? std::string(python) : find_on_path(python);
    // The runtime's own command module: it needs no entry point, so a runtime that is importable
    // but not pip-installed (on PYTHONPATH) still compiles.
    if (!found.empty() && is_executable(found)) return {found, "-m", "tilebc_runtime.cli"};
    return {};
  }
  tried = "`tilebc` on PATH";
  const std::string found = find_on_path("tilebc");
  if (!found.empty()) return {found};
  return {};
}

/// Run argv; return its exit status, with stdout+stderr collected in `output`.
int run_command(const std::vector<std::string>& argv, const std::string& log_path, std::string& output,
                const std::string& extra_env) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> raw;
  for (const std::string& arg : argv) raw.push_back(const_cast<char*>(arg.c_str()));
  raw.push_back(nullptr);
  // This environment with `extra_env` ("NAME=value") replacing any variable of that name.
  const std::string prefix = extra_env.substr(0, extra_env.find('=') + 1);
  std::vector<char*> env;
  for (char** item = environ; item && *item; ++item)
    if (std::strncmp(*item, prefix.c_str(), prefix.size()) != 0) env.push_back(*item);
  env.push_back(const_cast<char*>(extra_env.c_str()));
  env.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, raw[0], &actions, nullptr, raw.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    output = std::strerror(spawned);
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::ifstream log(log_path);
  std::ostringstream text;
  text << log.rdbuf();
  output = text.str();
  if (output.size() > 4000) output = "..." + output.substr(output.size() - 4000);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string make_temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/tilebc-cpp-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (!mkdtemp(buffer.data())) throw Error(Errc::io, std::string("cannot create a temporary directory: ") + std::strerror(errno), pattern);
  return buffer.data();
}

void remove_tree(const std::string& directory, const std::vector<std::string>& files) {
  for (const std::string& file : files) std::remove((directory + "/" + file).c_str());
  ::rmdir(directory.c_str());
}

/// The cache root this module reads (Options::cache_dir, else default_cache_root()), or "" when
/// there is none or it is not trusted (cache_trust_problem; `refused` then says why), as the
/// Python runtime turns its disk cache off for a root or v1/ another user could write.
std::string trusted_cache_root(const Options& options, std::string& refused) {
  const std::string root = options.cache_dir.empty() ? default_cache_root() : options.cache_dir;
  refused = root.empty() ? std::string() : cache_trust_problem(root);
  return refused.empty() ? root : std::string();
}

Image compile_with_python(ModuleState& state, const Entry& entry, const std::string& arch,
                          const std::vector<std::string>& keys, const std::string& cache_root,
                          const std::string& refused) {
  const std::string file_hint = state.from_file ? state.name : "FILE.tilebc";
  const std::string aot_hint = "tilebc compile " + file_hint + " --arch " + arch +
                               " --fatbin -o kernels.fatbin";
  std::string tried;
  const std::vector<std::string> prefix = state.options.allow_compile
                                              ? compiler_command(state.options, tried)
                                              : std::vector<std::string>{};
  if (prefix.empty()) {
    std::string why = state.options.allow_compile ? "the Python runtime was not found (tried " + tried + ")"
                                                  : "compiling is disabled (Options::allow_compile)";
    throw Error(Errc::compile_unavailable,
                "no cubin for '" + entry.name + "' on " + arch + " in the cache" +
                    (!refused.empty() ? " (not used: " + refused + ")"
                     : keys.empty()   ? std::string(" (no toolchain.json there)")
                                      : " (key " + keys.front() + ")") +
                    " and " + why + ". Install it (pip install tilebc tilebc-runtime, which provides "
                    "`tilebc compile`), set TILEBC_PYTHON to an interpreter that has it, or build ahead of "
                    "time with `" + aot_hint + "` and load kernels.fatbin",
                state.name);
  }
  const std::string directory = make_temp_dir();
  std::string input = state.name;
  std::vector<std::string> created = {"out.cubin", "out.cubin.json", "log.txt"};
  if (!state.from_file) {
    input = directory + "/module.tilebc";
    created.push_back("module.tilebc");
    std::ofstream stream(input, std::ios::binary);
    stream.write(reinterpret_cast<const char*>(state.bytes.data()), static_cast<std::streamsize>(state.bytes.size()));
    if (!stream) {
      remove_tree(directory, created);
      throw Error(Errc::io, "cannot write a temporary copy of the module", input);
    }
  }
  const std::string output = directory + "/out.cubin";
  std::vector<std::string> argv = prefix;
  for (const char* arg : {"compile"}) argv.emplace_back(arg);
  argv.insert(argv.end(), {input, "--entry", entry.name, "--arch", arch, "--emit", "cubin", "-o", output});
  std::string log;
  // The runtime must store into the cache this loader reads: pass the root ("off" when none).
  const int status = run_command(argv, directory + "/log.txt", log,
                                 "TILEBC_CACHE_DIR=" + (cache_root.empty() ? std::string("off") : cache_root));
  std::string command;
  for (const std::string& arg : argv) command += (command.empty() ? "" : " ") + arg;
  Image image;
  image.source = Image::Source::compiled;
  image.arch = arch;
  image.detail = command;
  std::ifstream cubin(output, std::ios::binary);
  std::string maps_problem;  // tensor_maps the launch could not build from
  if (status == 0 && cubin) {
    image.bytes.assign(std::istreambuf_iterator<char>(cubin), std::istreambuf_iterator<char>());
    // A metadata file beside the output, when the runtime writes one, gives the launch facts.
    std::ifstream facts(output + ".json");
    if (facts) {
      std::ostringstream text;
      text << facts.rdbuf();
      try {
        const Json json = Json::parse(text.str(), output + ".json");
        if (const Json* maps = json.get("tensor_maps")) {
          try {
            image.tensor_maps = parse_tensor_maps(*maps, "entry '" + entry.name + "'", output + ".json");
            check_tensor_maps(image.tensor_maps, entry, output + ".json");
          } catch (const Error& error) {
            maps_problem = error.message();
          }
        }
        if (const Json* threads = json.get("threads_per_cta"))
          if (auto value = threads->as_int64()) image.threads_per_cta = unsigned(*value);
        if (const Json* shared = json.get("dynamic_shared_bytes"))
          if (auto value = shared->as_int64()) image.dynamic_shared_bytes = unsigned(*value);
      } catch (const Error& error) {
        // a TMA kernel launched without the maps its facts describe would read past its
        // parameters, so facts that exist but cannot be read are an error
        maps_problem = "its launch facts are unreadable: " + error.message();
      }
    }
  }
  remove_tree(directory, created);
  if (status != 0 || image.bytes.empty())
    throw Error(Errc::compile_failed, "`" + command + "` " +
                                          (status == 0 ? "wrote no cubin" : "exited with status " + std::to_string(status)) +
                                          (log.empty() ? "" : ":\n" + log),
                state.name);
  if (!maps_problem.empty())
    throw Error(Errc::compile_failed, "`" + command + "` described its launch (" + output +
                ".json) in a way this loader cannot use: " + maps_problem, state.name);
  return image;
}

std::vector<std::string> keys_for(const ModuleState& state, const std::string& entry, const std::string& arch,
                                  const std::string& root) {
  std::vector<std::string> keys;
  for (const ToolchainRecord& record : read_toolchain(root)) {
    CacheKeyInputs inputs{record.toolchain, entry, arch, record.ptx_isa_for(arch), record.nvjitlink,
                          record.options_json};
    keys.push_back(cache_key(state.bytes.data(), state.bytes.size(), inputs));
  }
  return keys;
}

std::string resolve_arch(const ModuleState& state, const std::string& requested) {
  if (!requested.empty()) return requested;
  if (!state.options.arch.empty()) return state.options.arch;
  if (const char* env = std::getenv("TILEBC_ARCH"))
    if (*env) return env;
  return current_device_arch();
}

/// What the driver will run from the fatbin: the highest cubin arch of the device's major
/// version with a minor no higher than the device's, else the PTX image when its arch is not
/// newer than the device (the driver JIT-compiles it). Returns (arch, from_ptx).
std::pair<std::string, bool> select_fatbin_arch(const AotMetadata& aot, const std::string& device_arch,
                                                const std::string& name) {
  const unsigned device = parse_arch(device_arch);
  std::string best;
  unsigned best_number = 0;
  for (const std::string& arch : aot.archs) {
    const unsigned number = parse_arch(arch);
    if (number / 10 == device / 10 && number <= device && number >= best_number) {
      best = arch;
      best_number = number;
    }
  }
  if (!best.empty()) return {best, false};
  if (!aot.ptx_arch.empty() && parse_arch(aot.ptx_arch) <= device) return {aot.ptx_arch, true};
  std::string list;
  for (const std::string& arch : aot.archs) list += (list.empty() ? "" : ", ") + arch;
  const std::string ptx = aot.ptx_arch.empty() ? std::string(" and no PTX")
                                               : " and PTX for " + aot.ptx_arch;
  throw Error(Errc::no_code_for_device, "the fatbin has code for " + list + ptx + ", none of which runs on " +
                                            device_arch + "; rebuild it with --arch " + device_arch, name);
}

Image resolve_image(ModuleState& state, std::size_t index, const std::string& requested_arch) {
  const Entry& entry = state.entries()[index];
  const std::string arch = resolve_arch(state, requested_arch);
  if (state.fatbin) {
    const auto [chosen, from_ptx] = select_fatbin_arch(state.aot, arch, state.name);
    Image image;
    image.source = Image::Source::fatbin;
    image.arch = chosen;
    image.bytes = state.bytes;
    image.detail = from_ptx ? state.name + " (PTX " + chosen + ", JIT-compiled by the driver for " + arch + ")"
                            : state.name;
    if (from_ptx) {
      image.threads_per_cta = state.aot.ptx_launch[index].threads_per_cta;
      image.dynamic_shared_bytes = state.aot.ptx_launch[index].dynamic_shared_bytes;
      image.tensor_maps = state.aot.ptx_launch[index].tensor_maps;
    }
    for (const LaunchInfo& info : state.aot.launch[index]) {
      if (from_ptx || info.arch != chosen) continue;
      image.threads_per_cta = info.threads_per_cta;
      image.dynamic_shared_bytes = info.dynamic_shared_bytes;
      image.tensor_maps = info.tensor_maps;
    }
    return image;
  }
  std::string refused;
  const std::string root = trusted_cache_root(state.options, refused);
  std::vector<std::string> keys = root.empty() ? std::vector<std::string>{} : keys_for(state, entry.name, arch, root);
  auto lookup = [&]() -> std::optional<Image> {
    for (const std::string& key : keys) {
      if (auto hit = cache_lookup(root, key)) {
        try {
          check_tensor_maps(hit->tensor_maps, entry, hit->cubin_path);
        } catch (const Error&) {
          continue;  // maps that do not fit this entry's parameters: a damaged entry is a miss
        }
        Image image;
        image.source = Image::Source::cache;
        image.arch = arch;
        image.bytes = std::move(hit->cubin);
        image.threads_per_cta = hit->threads_per_cta;
        image.dynamic_shared_bytes = hit->dynamic_shared_bytes;
        image.tensor_maps = std::move(hit->tensor_maps);
        image.detail = hit->cubin_path;
        return image;
      }
    }
    return std::nullopt;
  };
  if (auto image = lookup()) return *image;
  Image compiled = compile_with_python(state, entry, arch, keys, root, refused);
  // The runtime cached it, with its launch facts; it may also have written toolchain.json first.
  if (!root.empty()) keys = keys_for(state, entry.name, arch, root);
  if (auto image = lookup()) return *image;
  return compiled;
}

}  // namespace

std::string current_device_arch() {
  const CUdevice device = driver::current_device();
  int major = 0, minor = 0;
  driver::check(driver::api().DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
                "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)");
  driver::check(driver::api().DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
                "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)");
  return arch_name(major, minor);
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : size_(bytes) {
  driver::current_device();
  CUdeviceptr address = 0;
  driver::check(driver::api().MemAlloc(&address, bytes ? bytes : 1), "cuMemAlloc");
  address_ = address;
}

DeviceBuffer::~DeviceBuffer() {
  if (address_) driver::api().MemFree(static_cast<CUdeviceptr>(address_));
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  if (bytes > size_) throw Error(Errc::argument_mismatch, "upload of " + std::to_string(bytes) + " bytes into a " +
                                                             std::to_string(size_) + "-byte buffer");
  driver::check(driver::api().MemcpyHtoD(static_cast<CUdeviceptr>(address_), host, bytes), "cuMemcpyHtoD");
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes > size_) throw Error(Errc::argument_mismatch, "download of " + std::to_string(bytes) + " bytes from a " +
                                                             std::to_string(size_) + "-byte buffer");
  driver::check(driver::api().MemcpyDtoH(host, static_cast<CUdeviceptr>(address_), bytes), "cuMemcpyDtoH");
}

void synchronize() { driver::check(driver::api().CtxSynchronize(), "cuCtxSynchronize"); }

// ---- Module ------------------------------------------------------------------------------------

Module Module::load(const std::string& path, Options options) {
  std::vector<std::uint8_t> bytes = read_file(path);
  if (bytes.size() >= 4 && bytes[0] == 0x50 && bytes[1] == 0xED && bytes[2] == 0x55 && bytes[3] == 0xBA) {
    const std::string metadata_path = path + ".json";
    std::ifstream stream(metadata_path, std::ios::binary);
    if (!stream)
      throw Error(Errc::io, "cannot read the fatbin's metadata " + metadata_path +
                                " (tilebc compile --fatbin writes it beside the fatbin)", path);
    std::ostringstream text;
    text << stream.rdbuf();
    auto state = std::make_shared<ModuleState>();
    state->aot = read_aot_metadata(text.str(), bytes.data(), bytes.size(), metadata_path);
    state->name = path;
    state->from_file = true;
    state->fatbin = true;
    state->bytes = std::move(bytes);
    state->options = std::move(options);
    return Module(state);
  }
  auto state = std::make_shared<ModuleState>();
  state->info = read_bytecode(bytes.data(), bytes.size(), path, ReadOptions{options.strict});
  state->name = path;
  state->from_file = true;
  state->bytes = std::move(bytes);
  state->options = std::move(options);
  return Module(state);
}

Module Module::load(std::vector<std::uint8_t> bytecode, Options options, std::string name) {
  auto state = std::make_shared<ModuleState>();
  state->info = read_bytecode(bytecode.data(), bytecode.size(), name, ReadOptions{options.strict});
  state->name = std::move(name);
  state->bytes = std::move(bytecode);
  state->options = std::move(options);
  return Module(state);
}

Module Module::load_fatbin(std::vector<std::uint8_t> fatbin, const std::string& metadata_json,
                           Options options, std::string name) {
  auto state = std::make_shared<ModuleState>();
  state->aot = read_aot_metadata(metadata_json, fatbin.data(), fatbin.size(), name + ".json");
  state->name = std::move(name);
  state->fatbin = true;
  state->bytes = std::move(fatbin);
  state->options = std::move(options);
  return Module(state);
}

const std::vector<Entry>& Module::entries() const { return state_->entries(); }

const std::vector<DecodeWarning>& Module::warnings() const { return state_->info.warnings; }

Version Module::version() const { return state_->fatbin ? state_->aot.bytecode_version : state_->info.version; }

bool Module::is_fatbin() const { return state_->fatbin; }

Function Module::function(const std::string& name) const {
  const auto& entries = state_->entries();
  std::string names;
  for (std::size_t index = 0; index < entries.size(); ++index) {
    if (entries[index].name == name) return Function(state_, index);
    names += (names.empty() ? "" : ", ") + entries[index].name;
  }
  throw Error(Errc::not_found, "no entry named '" + name + "' (entries: " + (names.empty() ? "none" : names) + ")",
              state_->name);
}

std::vector<std::string> Module::cache_keys(const std::string& entry, const std::string& arch) const {
  if (state_->fatbin) return {};
  std::string refused;
  const std::string root = trusted_cache_root(state_->options, refused);
  return root.empty() ? std::vector<std::string>{} : keys_for(*state_, entry, arch, root);
}

// ---- tensor maps -------------------------------------------------------------------------------

namespace {

/// cuTensorMapEncodeTiled as tilebc_runtime/tensor_maps.py encode() calls it: interleave none,
/// L2 promotion 128 B, OOB fill NONE (zeros), element strides 1.
void encode_tensor_map(const TiledMap& map, CUtensorMap& out, const std::string& entry) {
  const auto encode = driver::tensor_map_encoder();
  const CUtensorMapDataType type =
      map.element == "bf16" ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  if (map.swizzle == 32) swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
  if (map.swizzle == 64) swizzle = CU_TENSOR_MAP_SWIZZLE_64B;
  if (map.swizzle == 128) swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  const std::vector<cuuint64_t> dims(map.dims.begin(), map.dims.end());
  const std::vector<cuuint64_t> strides(map.strides.begin(), map.strides.end());
  const std::vector<cuuint32_t> box(map.box.begin(), map.box.end());
  const std::vector<cuuint32_t> element_strides(map.dims.size(), 1);
  const std::string call = "cuTensorMapEncodeTiled('" + entry + "' tensor map " + map.param + ")";
  driver::check(encode(&out, type, static_cast<cuuint32_t>(map.dims.size()),
                       reinterpret_cast<void*>(static_cast<std::uintptr_t>(map.address)), dims.data(),
                       strides.data(), box.data(), element_strides.data(), CU_TENSOR_MAP_INTERLEAVE_NONE,
                       swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                call.c_str());
}

}  // namespace

// ---- Function ----------------------------------------------------------------------------------

// Dynamic shared memory a launch may request without CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
constexpr unsigned kDefaultDynamicSharedLimit = 48 * 1024;

const Entry& Function::entry() const { return state_->entries()[index_]; }

Image Function::image(const std::string& arch) const { return resolve_image(*state_, index_, arch); }

void Function::launch_args(Dim3 grid, const std::vector<Arg>& args, Stream stream) const {
  const Entry& entry = this->entry();
  check_arguments(entry, args);  // before anything touches the driver
  if (grid.x == 0 || grid.y == 0 || grid.z == 0)
    throw Error(Errc::argument_mismatch, "grid (" + std::to_string(grid.x) + ", " + std::to_string(grid.y) +
                                             ", " + std::to_string(grid.z) + ") has an empty dimension");
  const driver::Api& cuda = driver::api();
  const std::string arch = resolve_arch(*state_, {});
  const std::string key = entry.name + "@" + arch;
  CUfunction function = nullptr;
  unsigned threads = 0, shared = 0;
  std::vector<TensorMapRecord> maps;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto found = state_->functions.find(key);
    if (found != state_->functions.end()) {
      function = found->second.first;
      threads = found->second.second;
      shared = state_->images[key].dynamic_shared_bytes;
      maps = state_->images[key].tensor_maps;
    } else {
      Image image = resolve_image(*state_, index_, arch);
      const std::string module_key = state_->fatbin ? "@" + image.arch : key;
      CUmodule module = nullptr;
      auto loaded = state_->modules.find(module_key);
      if (loaded != state_->modules.end()) {
        module = loaded->second;
      } else {
        driver::check(cuda.ModuleLoadData(&module, image.bytes.data()), "cuModuleLoadData");
        state_->modules[module_key] = module;
      }
      driver::check(cuda.ModuleGetFunction(&function, module, entry.name.c_str()), "cuModuleGetFunction");
      threads = image.threads_per_cta;
      if (threads == 0) {
        int value = 0;
        driver::check(cuda.FuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function),
                      "cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)");
        threads = static_cast<unsigned>(value);
      }
      shared = image.dynamic_shared_bytes;
      if (shared > kDefaultDynamicSharedLimit) {
        // past 48 KiB a launch fails unless the function opted in, once per loaded function
        driver::check(cuda.FuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            static_cast<int>(shared)),
                      "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
      }
      maps = image.tensor_maps;
      image.bytes.clear();  // the driver has its own copy
      state_->images[key] = image;
      state_->functions[key] = {function, threads};
    }
  }
  std::vector<std::uint64_t> storage(args.size());
  std::vector<void*> pointers(args.size());
  for (std::size_t index = 0; index < args.size(); ++index) {
    storage[index] = args[index].storage;  // little-endian: the low bytes are the value
    pointers[index] = &storage[index];
  }
  // TMA kernels take their maps by value after their own parameters (128 bytes, 64-aligned),
  // encoded from this launch's arguments; `encoded` outlives the launch call
  std::vector<CUtensorMap> encoded(maps.size());
  std::vector<TiledMap> resolved;
  bool any_empty = false;
  for (const TensorMapRecord& record : maps) {
    resolved.push_back(resolve_tensor_map(record, entry, args));
    any_empty = any_empty || resolved.back().empty();
  }
  // a map over an empty array goes over the context's zeroed scratch (extent 0 cannot be encoded)
  const std::uint64_t scratch = any_empty ? driver::zero_scratch(kTensorMapZeroScratchBytes) : 0;
  for (std::size_t index = 0; index < maps.size(); ++index) {
    encode_tensor_map(over_zeros(resolved[index], scratch), encoded[index], entry.name);
    pointers.push_back(&encoded[index]);
  }
  driver::check(cuda.LaunchKernel(function, grid.x, grid.y, grid.z, threads, 1, 1, shared,
                                  static_cast<CUstream>(stream.handle), pointers.data(), nullptr),
                "cuLaunchKernel");
}

}  // namespace tilebc
