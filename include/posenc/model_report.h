// posenc/model_report.h: a model's per-layer positional plan (posenc/model.h) as `posenc inspect`
// prints it, for the CLI, the Python package (ModelPositions.to_json / .table, `python -m posenc
// inspect`) and any program that wants the same text.
//
//   model_report_json: every layer, with at least {"layer", "position", "rope": {"layout",
//     "rotary_dims", "base", "rope_type", "inv_freq", "attention_factor", ...}, "attention": {"causal",
//     "window", "chunk", "softmax_scale", "softcap", "sinks", ...}} (null where a field does not apply),
//     the model's keys and its warnings; indented by 2.
//   model_report_table: identical layers grouped on one line ("layers 0-4, 6-10: ..."), then the
//     frequencies at seq_len once per distinct RoPE; warnings are not included (the caller prints them).
// inv_freq and attention_factor are those at seq_len (0: max_position_embeddings), which matters for
// dynamic and longrope.
#pragma once
#include <cstdint>
#include <string>

#include "posenc/model.h"

namespace posenc {

std::string model_report_json(const ModelPositions& m, int64_t seq_len = 0);
std::string model_report_table(const ModelPositions& m, int64_t seq_len = 0);

}  // namespace posenc
