// python/src/model.cc: a real model's positional setup per layer (posenc/model.h), read from a HF
// config.json with transformers 5's semantics. Plain data objects; the Python layer
// (posenc/model.py) adds from_hf (dict or path), warnings.warn and inv_freq per layer.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "arrays.h"
#include "posenc/model.h"
#include "posenc/model_report.h"

namespace posenc::python {

void bind_model(nb::module_& m) {
  nb::class_<QueryTemperature>(m, "QueryTemperature")
      .def_prop_ro("kind",
                   [](const QueryTemperature& t) { return std::string(query_temperature_name(t.kind)); })
      .def_ro("scale", &QueryTemperature::scale)
      .def_ro("floor_scale", &QueryTemperature::floor_scale)
      .def("factor", &QueryTemperature::factor, nb::arg("position"));

  nb::class_<LayerAttention>(m, "LayerAttention")
      .def_ro("causal", &LayerAttention::causal)
      .def_ro("window", &LayerAttention::window)
      .def_ro("chunk", &LayerAttention::chunk)
      .def_ro("softmax_scale", &LayerAttention::softmax_scale)
      .def_ro("softcap", &LayerAttention::softcap)
      .def_ro("sinks", &LayerAttention::sinks)
      .def_ro("temperature", &LayerAttention::temperature);

  nb::class_<TopkIndexer>(m, "TopkIndexer")
      .def_ro("topk", &TopkIndexer::topk)
      .def_ro("heads", &TopkIndexer::heads)
      .def_ro("head_dim", &TopkIndexer::head_dim)
      .def_ro("shared", &TopkIndexer::shared)
      .def_ro("over_compressed", &TopkIndexer::over_compressed)
      .def_ro("block_size", &TopkIndexer::block_size)
      .def_ro("local_blocks", &TopkIndexer::local_blocks)
      .def_ro("pooled_keys", &TopkIndexer::pooled_keys)
      .def_ro("rope", &TopkIndexer::rope)
      .def_prop_ro("rotary_dims",
                   [](const TopkIndexer& x) { return std::make_tuple(x.rotary_lo, x.rotary_hi); });

  nb::class_<LayerPlan>(m, "LayerPlan")
      .def_ro("layer", &LayerPlan::layer)
      .def_ro("layer_type", &LayerPlan::layer_type)
      .def_ro("softmax_attention", &LayerPlan::softmax_attention)
      .def_prop_ro("position",
                   [](const LayerPlan& l) { return std::string(position_method_name(l.position)); })
      .def_ro("rope", &LayerPlan::rope)
      .def_prop_ro("rotary_dims",
                   [](const LayerPlan& l) { return std::make_tuple(l.rotary_lo, l.rotary_hi); })
      .def_ro("qk_head_dim", &LayerPlan::qk_head_dim)
      .def_ro("v_head_dim", &LayerPlan::v_head_dim)
      .def_ro("attention", &LayerPlan::attention)
      .def_ro("indexer", &LayerPlan::indexer)
      .def_ro("rotated_values", &LayerPlan::rotated_values)
      .def_prop_ro("compressed", [](const LayerPlan& l) -> nb::object {
        if (!l.compressed) return nb::none();
        nb::dict d;
        d["rate"] = l.compressed->rate;
        d["overlapping"] = l.compressed->overlapping;
        return d;
      });

  nb::class_<ModelPositions>(m, "ModelPositions")
      .def_ro("model_type", &ModelPositions::model_type)
      .def_ro("num_layers", &ModelPositions::num_layers)
      .def_ro("num_heads", &ModelPositions::num_heads)
      .def_ro("max_position_embeddings", &ModelPositions::max_position_embeddings)
      .def_ro("t5_num_buckets", &ModelPositions::t5_num_buckets)
      .def_ro("t5_max_distance", &ModelPositions::t5_max_distance)
      .def_ro("t5_bias_per_layer", &ModelPositions::t5_bias_per_layer)
      .def_ro("learned_position_offset", &ModelPositions::learned_position_offset)
      .def_ro("learned_embeddings", &ModelPositions::learned_embeddings)
      .def_ro("encoder_max_position_embeddings", &ModelPositions::encoder_max_position_embeddings)
      // sinusoidal: None, or the keyword arguments of posenc.sinusoidal (dim, base, layout, frequencies,
      // offset)
      .def_prop_ro("sinusoidal",
                   [](const ModelPositions& p) -> nb::object {
                     if (!p.sinusoidal) return nb::none();
                     const SinusoidalConfig& s = *p.sinusoidal;
                     nb::dict d;
                     d["dim"] = s.dim;
                     d["base"] = s.base;
                     d["layout"] = sinusoidal_layout_name(s.layout);
                     d["frequencies"] = sinusoidal_frequencies_name(s.frequencies);
                     d["offset"] = s.position_offset;
                     return d;
                   })
      .def_ro("remote_code", &ModelPositions::remote_code)
      .def_ro("layers", &ModelPositions::layers)
      .def_ro("warnings", &ModelPositions::warnings)
      // posenc/model_report.h: `posenc inspect`'s JSON document and table (seq_len 0: the maximum).
      .def("report_json", &model_report_json, nb::arg("seq_len") = 0)
      .def("report_table", &model_report_table, nb::arg("seq_len") = 0);

  m.def("model_positions_from_hf_json", &model_positions_from_hf_json, nb::arg("json_text"));
}

}  // namespace posenc::python
