// checkpoint.h — the weights of a model directory, in one safetensors file or in shards.
//
// transformers' save_pretrained writes one `model.safetensors` up to its shard size (5 GB by
// default) and above it `model-00001-of-0000N.safetensors` … with `model.safetensors.index.json`
// {"metadata": {...}, "weight_map": {tensor name: shard file}}. A Checkpoint opens either (each
// shard memory-mapped, SafeTensorsFile) and answers by tensor name, whichever file holds it.
// The index is checked before any tensor is read: every shard it names exists in the index's
// folder, every tensor it lists is in the shard it names, and every tensor of a shard is listed
// there (a tensor in two shards, or a stray one, would make "which bytes are the weight"
// ambiguous); any problem is one InputError naming the file and the tensor.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "glmasr/safetensors.h"

namespace glmasr {

class Checkpoint {
public:
    // `path`: a .safetensors file, or a model.safetensors.index.json and its shards.
    explicit Checkpoint(const std::string& path);

    // The weights file of a model directory, as transformers looks for it: model.safetensors,
    // else model.safetensors.index.json. Throws InputError when the folder has neither.
    static std::string find_in(const std::filesystem::path& model_dir);

    const std::string& path() const { return path_; }
    const SafeTensorEntry* find(const std::string& name) const;  // nullptr if absent
    std::vector<std::string> names() const;                      // sorted, over all shards
    size_t shard_count() const { return shards_.size(); }

    // As SafeTensorsFile's, in whichever shard holds the tensor.
    void read_f32(const std::string& name, const std::vector<int64_t>& expected_shape,
                  float* out) const;
    void mark_used(const std::string& name) const;
    std::vector<std::string> unused() const;

private:
    std::string path_;
    std::vector<std::unique_ptr<SafeTensorsFile>> shards_;
    std::map<std::string, const SafeTensorsFile*> shard_of_;  // tensor name → its shard
    const SafeTensorsFile& shard_holding(const std::string& name) const;
};

}  // namespace glmasr
