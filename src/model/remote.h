// src/model/remote.h: helpers of the remote-code planners (src/model/remote.cc: qwen, chatglm, internlm2,
// stablelm_epoch, RefinedWeb; src/model/remote_llama_forks.cc: minicpm, baichuan).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "src/model/parse.h"

namespace posenc::detail::remote {

std::string excerpt(Obj& j, const std::string& k);
// The first of `keys` present, an integer in [1, 2^32]; `fallback` when none is.
int64_t positive(Obj& j, std::initializer_list<const char*> keys, int64_t fallback);
// A rotary base read from `key` (or derived from it), in the range posenc's RoPE accepts.
double checked_base(const std::string& key, double base);
// int(dims * fraction) as the authors' code truncates it: even and > 0, or an error naming the key.
int64_t rotated_dims(Obj& j, const std::string& key, double fallback, int64_t dims);
// hidden / heads, which must divide.
int64_t head_size(const std::string& type, int64_t hidden, int64_t heads);
// Every layer the same: causal attention, scale head^-0.5, no window, the given position method.
ModelPositions uniform(const std::string& type, const char* code, int64_t layers, int64_t heads, int64_t head,
                       int64_t max_pos, const std::optional<RopeConfig>& rope, PositionMethod method);

// The planners of src/model/remote_llama_forks.cc.
ModelPositions minicpm(Obj& j, std::vector<std::string>& warnings);
ModelPositions baichuan(Obj& j, std::vector<std::string>& warnings);

}  // namespace posenc::detail::remote
