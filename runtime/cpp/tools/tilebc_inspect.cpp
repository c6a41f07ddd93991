// tilebc-inspect: the C++ reader on the command line, printing one JSON object per line.
// The pytest wrapper (tests/test_cpp_loader.py) drives it to compare the C++ and Python readers.
//
//   tilebc-inspect list [--strict] FILE... entries, signatures and decode warnings, or the error
//   tilebc-inspect truncations FILE...     read every proper prefix; report any that is accepted
//   tilebc-inspect key [--toolchain T] [--arch A] [--ptx-isa V] [--nvjitlink V] [--options JSON] FILE...
//   tilebc-inspect keys --arch A [--cache DIR] FILE...   the loader's cache keys per entry, one per
//                                          toolchain.json record (backend order), and the root used
//   tilebc-inspect canon JSON...           canonical JSON text (the cache key's options field)
//   tilebc-inspect fatbin FILE...          images in a fatbinary
//   tilebc-inspect module FILE [--arch A] [--cache DIR] [--no-compile]   load, list, resolve code
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tilebc/json.hpp"
#include "tilebc/loader.hpp"

using tilebc::Json;

namespace {

Json error_json(const std::string& file, const tilebc::Error& error) {
  auto object = Json::object();
  object.members()["file"] = Json::string(file);
  object.members()["ok"] = Json::boolean(false);
  object.members()["code"] = Json::string(error.code().message());
  object.members()["errc"] = Json::integer(static_cast<int>(error.errc()));
  object.members()["message"] = Json::string(error.message());
  object.members()["what"] = Json::string(error.what());
  if (error.offset()) object.members()["offset"] = Json::integer(static_cast<std::int64_t>(*error.offset()));
  return object;
}

Json entries_json(const std::vector<tilebc::Entry>& entries) {
  auto list = Json::array();
  for (const auto& entry : entries) {
    auto item = Json::object();
    item.members()["name"] = Json::string(entry.name);
    item.members()["signature"] = Json::string(entry.signature);
    auto params = Json::array();
    for (const auto& param : entry.params) {
      auto p = Json::object();
      p.members()["type"] = Json::string(param.type);
      p.members()["kind"] = Json::string(tilebc::to_string(param.kind));
      p.members()["element"] = Json::string(param.element);
      p.members()["bits"] = Json::integer(param.bits);
      p.members()["size"] = Json::integer(param.size);
      params.items().push_back(std::move(p));
    }
    item.members()["params"] = std::move(params);
    auto results = Json::array();
    for (const auto& result : entry.results) results.items().push_back(Json::string(result));
    item.members()["results"] = std::move(results);
    item.members()["body"] = Json::array({Json::integer(static_cast<std::int64_t>(entry.body_begin)),
                                          Json::integer(static_cast<std::int64_t>(entry.body_end))});
    list.items().push_back(std::move(item));
  }
  return list;
}

int list(const std::vector<std::string>& files, bool strict) {
  for (const auto& file : files) {
    try {
      const auto bytes = tilebc::read_file(file);
      const auto info = tilebc::read_bytecode(bytes.data(), bytes.size(), file, tilebc::ReadOptions{strict});
      auto object = Json::object();
      object.members()["file"] = Json::string(file);
      object.members()["ok"] = Json::boolean(true);
      object.members()["version"] = Json::string(info.version.str());
      object.members()["preview"] = Json::boolean(info.preview);
      object.members()["producer"] = info.producer ? Json::string(*info.producer) : Json();
      object.members()["entries"] = entries_json(info.entries);
      auto undecoded = Json::array();
      for (const auto& range : info.undecoded)
        undecoded.items().push_back(Json::array({Json::integer(static_cast<std::int64_t>(range.first)),
                                                 Json::integer(static_cast<std::int64_t>(range.second))}));
      object.members()["undecoded"] = std::move(undecoded);
      auto warnings = Json::array();
      for (const auto& warning : info.warnings) {
        auto item = Json::object();
        item.members()["message"] = Json::string(warning.message);
        item.members()["offset"] = Json::integer(static_cast<std::int64_t>(warning.offset));
        item.members()["action"] = Json::string(warning.action);
        warnings.items().push_back(std::move(item));
      }
      object.members()["warnings"] = std::move(warnings);
      std::cout << object.dump() << "\n";
    } catch (const tilebc::Error& error) {
      std::cout << error_json(file, error).dump() << "\n";
    }
  }
  return 0;
}

int truncations(const std::vector<std::string>& files) {
  for (const auto& file : files) {
    const auto bytes = tilebc::read_file(file);
    auto accepted = Json::array();
    auto bad_offsets = Json::array();
    std::int64_t rejected = 0;
    for (std::size_t length = 0; length < bytes.size(); ++length) {
      // A fresh heap copy of exactly `length` bytes, so ASan sees any read past the prefix.
      std::vector<std::uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(length));
      for (const bool strict : {false, true}) {  // a prefix counts as rejected if both modes refuse it
        try {
          tilebc::read_bytecode(prefix.data(), prefix.size(), file, tilebc::ReadOptions{strict});
          accepted.items().push_back(Json::integer(static_cast<std::int64_t>(length)));
          break;
        } catch (const tilebc::Error& error) {
          if (strict) ++rejected;
          if (!error.offset() || *error.offset() > length)
            bad_offsets.items().push_back(Json::integer(static_cast<std::int64_t>(length)));
        }
      }
    }
    auto object = Json::object();
    object.members()["file"] = Json::string(file);
    object.members()["size"] = Json::integer(static_cast<std::int64_t>(bytes.size()));
    object.members()["rejected"] = Json::integer(rejected);
    object.members()["accepted"] = std::move(accepted);
    object.members()["bad_offsets"] = std::move(bad_offsets);
    std::cout << object.dump() << "\n";
  }
  return 0;
}

int key(const std::map<std::string, std::string>& flags, const std::vector<std::string>& files) {
  auto flag = [&](const char* name) {
    auto found = flags.find(name);
    return found == flags.end() ? std::string() : found->second;
  };
  const std::string options = Json::parse(flag("--options").empty() ? "{}" : flag("--options")).dump();
  for (const auto& file : files) {
    try {
      const auto bytes = tilebc::read_file(file);
      const auto info = tilebc::read_bytecode(bytes.data(), bytes.size(), file);
      auto keys = Json::object();
      for (const auto& entry : info.entries) {
        tilebc::CacheKeyInputs inputs{flag("--toolchain"), entry.name, flag("--arch"), flag("--ptx-isa"),
                                      flag("--nvjitlink"), options};
        keys.members()[entry.name] = Json::string(tilebc::cache_key(bytes.data(), bytes.size(), inputs));
      }
      auto object = Json::object();
      object.members()["file"] = Json::string(file);
      object.members()["ok"] = Json::boolean(true);
      object.members()["keys"] = std::move(keys);
      std::cout << object.dump() << "\n";
    } catch (const tilebc::Error& error) {
      std::cout << error_json(file, error).dump() << "\n";
    }
  }
  return 0;
}

int keys(const std::map<std::string, std::string>& flags, const std::vector<std::string>& files) {
  tilebc::Options options;
  if (flags.count("--cache")) options.cache_dir = flags.at("--cache");
  const std::string arch = flags.count("--arch") ? flags.at("--arch") : "sm_90";
  const std::string root = options.cache_dir.empty() ? tilebc::default_cache_root() : options.cache_dir;
  auto backends = Json::array();
  for (const auto& record : tilebc::read_toolchain(root)) backends.items().push_back(Json::string(record.backend));
  for (const auto& file : files) {
    try {
      const auto loaded = tilebc::Module::load(file, options);
      auto per_entry = Json::object();
      for (const auto& entry : loaded.entries()) {
        auto list = Json::array();
        for (const auto& key : loaded.cache_keys(entry.name, arch)) list.items().push_back(Json::string(key));
        per_entry.members()[entry.name] = std::move(list);
      }
      auto object = Json::object();
      object.members()["file"] = Json::string(file);
      object.members()["ok"] = Json::boolean(true);
      object.members()["root"] = Json::string(root);
      object.members()["backends"] = backends;  // the same for every file
      object.members()["keys"] = std::move(per_entry);
      std::cout << object.dump() << "\n";
    } catch (const tilebc::Error& error) {
      std::cout << error_json(file, error).dump() << "\n";
    }
  }
  return 0;
}

int fatbin(const std::vector<std::string>& files) {
  for (const auto& file : files) {
    try {
      const auto bytes = tilebc::read_file(file);
      auto images = Json::array();
      for (const auto& image : tilebc::read_fatbin(bytes.data(), bytes.size(), file)) {
        auto item = Json::object();
        item.members()["kind"] = Json::string(image.kind == 1 ? "ptx" : image.kind == 2 ? "elf" : "other");
        item.members()["arch"] = Json::string("sm_" + std::to_string(image.arch));
        item.members()["offset"] = Json::integer(static_cast<std::int64_t>(image.offset));
        item.members()["size"] = Json::integer(static_cast<std::int64_t>(image.size));
        images.items().push_back(std::move(item));
      }
      auto object = Json::object();
      object.members()["file"] = Json::string(file);
      object.members()["ok"] = Json::boolean(true);
      object.members()["images"] = std::move(images);
      std::cout << object.dump() << "\n";
    } catch (const tilebc::Error& error) {
      std::cout << error_json(file, error).dump() << "\n";
    }
  }
  return 0;
}

int module(const std::map<std::string, std::string>& flags, const std::vector<std::string>& files) {
  tilebc::Options options;
  if (flags.count("--cache")) options.cache_dir = flags.at("--cache");
  if (flags.count("--arch")) options.arch = flags.at("--arch");
  if (flags.count("--no-compile")) options.allow_compile = false;
  for (const auto& file : files) {
    try {
      const auto loaded = tilebc::Module::load(file, options);
      auto object = Json::object();
      object.members()["file"] = Json::string(file);
      object.members()["ok"] = Json::boolean(true);
      object.members()["fatbin"] = Json::boolean(loaded.is_fatbin());
      object.members()["entries"] = entries_json(loaded.entries());
      if (!options.arch.empty()) {
        auto images = Json::object();
        for (const auto& entry : loaded.entries()) {
          auto item = Json::object();
          try {
            const auto image = loaded.function(entry.name).image();
            static const char* sources[] = {"fatbin", "cache", "compiled"};
            item.members()["source"] = Json::string(sources[static_cast<int>(image.source)]);
            item.members()["arch"] = Json::string(image.arch);
            item.members()["size"] = Json::integer(static_cast<std::int64_t>(image.bytes.size()));
            item.members()["threads_per_cta"] = Json::integer(image.threads_per_cta);
            item.members()["dynamic_shared_bytes"] = Json::integer(image.dynamic_shared_bytes);
            item.members()["detail"] = Json::string(image.detail);
            auto maps = Json::array();  // TMA kernels: the arrays their tensor maps describe
            for (const auto& map : image.tensor_maps) maps.items().push_back(Json::integer(map.array));
            item.members()["tensor_map_arrays"] = std::move(maps);
          } catch (const tilebc::Error& error) {
            item = error_json(file, error);
          }
          images.members()[entry.name] = std::move(item);
        }
        object.members()["images"] = std::move(images);
      }
      std::cout << object.dump() << "\n";
    } catch (const tilebc::Error& error) {
      std::cout << error_json(file, error).dump() << "\n";
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: tilebc-inspect list|truncations|key|keys|canon|fatbin|module ...\n";
    return 2;
  }
  const std::string command = argv[1];
  std::map<std::string, std::string> flags;
  std::vector<std::string> rest;
  for (int index = 2; index < argc; ++index) {
    const std::string arg = argv[index];
    if (arg == "--no-compile" || arg == "--strict") {
      flags[arg] = "1";
    } else if (arg.rfind("--", 0) == 0 && index + 1 < argc && command != "canon") {
      flags[arg] = argv[++index];
    } else {
      rest.push_back(arg);
    }
  }
  try {
    if (command == "list") return list(rest, flags.count("--strict") > 0);
    if (command == "truncations") return truncations(rest);
    if (command == "key") return key(flags, rest);
    if (command == "fatbin") return fatbin(rest);
    if (command == "keys") return keys(flags, rest);
    if (command == "module") return module(flags, rest);
    if (command == "canon") {
      for (const auto& text : rest) std::cout << Json::parse(text).dump() << "\n";
      return 0;
    }
  } catch (const tilebc::Error& error) {
    std::cerr << "tilebc-inspect: " << error.what() << "\n";
    return 1;
  }
  std::cerr << "tilebc-inspect: unknown command " << command << "\n";
  return 2;
}
