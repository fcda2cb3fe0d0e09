// checkpoint.cpp — one safetensors file, or the shards of a model.safetensors.index.json,
// behind one lookup by tensor name (checkpoint.h says what is checked and why).
#include "glmasr/checkpoint.h"

#include <algorithm>
#include <fstream>
#include <set>

#include "glmasr/error.h"
#include "glmasr/json_limits.h"

namespace glmasr {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr std::uintmax_t kMaxIndexBytes = 64u << 20;  // Nano-sized indexes are ~100 KB

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The index's weight_map: tensor name → shard file name (a plain name in the index's folder).
std::map<std::string, std::string> read_weight_map(const std::string& path) {
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(path, ec);
    if (ec || !fs::is_regular_file(path))
        throw InputError(path + ": cannot read (not a regular file)");
    if (size > kMaxIndexBytes) throw InputError(path + ": larger than 64 MiB, not a shard index");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path + ": cannot open");
    nlohmann::json index;
    try {
        index = parse_json_limited(path, in);
    } catch (const nlohmann::json::exception& e) {
        throw InputError(path + ": not valid JSON (" + e.what() + ")");
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
        throw InputError(path + ": no \"weight_map\" object (not a safetensors shard index)");
    std::map<std::string, std::string> map;
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
        if (!shard.is_string())
            throw InputError(path + ": the shard of tensor '" + tensor + "' is not a file name");
        const std::string file = shard.get<std::string>();
        if (file.empty() || file.find('/') != std::string::npos || file == "." || file == ".." ||
            !ends_with(file, ".safetensors"))
            throw InputError(path + ": tensor '" + tensor + "' names shard '" + file +
                             "', not a .safetensors file in the index's folder");
        map.emplace(tensor, file);
    }
    if (map.empty()) throw InputError(path + ": the weight_map lists no tensor");
    return map;
}

}  // namespace

std::string Checkpoint::find_in(const fs::path& model_dir) {
    for (const char* name : {kSingleFile, kIndexFile})
        if (fs::is_regular_file(model_dir / name)) return (model_dir / name).string();
    throw InputError(model_dir.string() + ": no " + kSingleFile + " (nor " + kIndexFile + ")");
}

Checkpoint::Checkpoint(const std::string& path) : path_(path) {
    if (!ends_with(path, ".index.json")) {
        shards_.push_back(std::make_unique<SafeTensorsFile>(path));
        for (const std::string& name : shards_[0]->names())
            shard_of_.emplace(name, shards_[0].get());
        return;
    }
    const std::map<std::string, std::string> weight_map = read_weight_map(path);
    const fs::path folder = fs::path(path).parent_path();
    std::map<std::string, const SafeTensorsFile*> by_file;
    std::set<std::string> files;
    for (const auto& [tensor, file] : weight_map) files.insert(file);
    for (const std::string& file : files) {
        if (!fs::is_regular_file(folder / file))
            throw InputError(path + ": shard '" + file + "' is not in " + folder.string());
        shards_.push_back(std::make_unique<SafeTensorsFile>((folder / file).string()));
        by_file[file] = shards_.back().get();
    }
    for (const auto& [tensor, file] : weight_map) {
        const SafeTensorsFile* shard = by_file.at(file);
        if (!shard->find(tensor))
            throw InputError(path + ": tensor '" + tensor + "' is listed in shard '" + file +
                             "', which does not hold it");
        shard_of_[tensor] = shard;
    }
    for (const auto& [file, shard] : by_file)
        for (const std::string& tensor : shard->names()) {
            auto listed = weight_map.find(tensor);
            if (listed == weight_map.end())
                throw InputError(path + ": shard '" + file + "' holds tensor '" + tensor +
                                 "', which the index does not list");
            if (listed->second != file)
                throw InputError(path + ": tensor '" + tensor + "' is in shard '" + file +
                                 "' and in shard '" + listed->second + "'");
        }
}

const SafeTensorEntry* Checkpoint::find(const std::string& name) const {
    auto it = shard_of_.find(name);
    return it == shard_of_.end() ? nullptr : it->second->find(name);
}

std::vector<std::string> Checkpoint::names() const {
    std::vector<std::string> out;
    for (const auto& [name, shard] : shard_of_) out.push_back(name);
    return out;  // std::map keeps them sorted
}

const SafeTensorsFile& Checkpoint::shard_holding(const std::string& name) const {
    auto it = shard_of_.find(name);
    if (it == shard_of_.end()) throw InputError(path_ + ": tensor '" + name + "' is missing");
    return *it->second;
}

void Checkpoint::read_f32(const std::string& name, const std::vector<int64_t>& expected_shape,
                          float* out) const {
    shard_holding(name).read_f32(name, expected_shape, out);
}

void Checkpoint::mark_used(const std::string& name) const { shard_holding(name).mark_used(name); }

std::vector<std::string> Checkpoint::unused() const {
    std::vector<std::string> out;
    for (const auto& shard : shards_)
        for (std::string& name : shard->unused()) out.push_back(std::move(name));
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace glmasr
