// tests/model/test_model_report.cc: posenc/model_report.h, the text of `posenc inspect`, from real
// config.json files (tests/data/hf_configs): the JSON document carries every layer with the plan's own values
// (the frequencies at the requested length from rope_frequencies, the attention fields of LayerPlan), and the
// table groups identical layers into index ranges.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "posenc/error.h"
#include "posenc/model.h"
#include "posenc/model_report.h"

namespace posenc {
namespace {
using json = nlohmann::json;

ModelPositions load(const std::string& file) {
  return model_positions_from_hf_file(std::string(POSENC_TEST_DATA_DIR) + "/hf_configs/" + file);
}

TEST(ModelReport, JsonListsEveryLayerWithThePlansValues) {
  const ModelPositions m = load("gemma3__gemma-3-27b-it.json");  // local and global layers
  for (const int64_t seq_len : {int64_t{0}, int64_t{4096}}) {
    const json doc = json::parse(model_report_json(m, seq_len));
    const int64_t at = seq_len > 0 ? seq_len : m.max_position_embeddings;
    EXPECT_EQ(doc.at("model_type"), "gemma3_text");
    EXPECT_EQ(doc.at("seq_len"), at);
    ASSERT_EQ(doc.at("layers").size(), m.layers.size());
    EXPECT_EQ(doc.at("warnings").size(), m.warnings.size());
    for (const LayerPlan& l : m.layers) {
      const json& j = doc.at("layers").at(static_cast<size_t>(l.layer));
      EXPECT_EQ(j.at("layer"), l.layer);
      EXPECT_EQ(j.at("layer_type"), l.layer_type);
      EXPECT_EQ(j.at("position"), "rope");
      const RopeFrequencies f = rope_frequencies(*l.rope, at);
      EXPECT_EQ(j.at("rope").at("inv_freq").get<std::vector<double>>(), f.inv_freq);
      EXPECT_EQ(j.at("rope").at("attention_factor"), f.attention_factor);
      EXPECT_EQ(j.at("rope").at("base"), l.rope->base);
      EXPECT_EQ(j.at("rope").at("rotary_dims"), json::array({l.rotary_lo, l.rotary_hi}));
      EXPECT_EQ(j.at("rope").at("layout"), "half");
      const json& a = j.at("attention");
      EXPECT_EQ(a.at("causal"), true);
      EXPECT_EQ(a.at("softmax_scale"), l.attention.softmax_scale);
      if (l.layer_type == "sliding_attention")
        EXPECT_EQ(a.at("window"), 1024);
      else
        EXPECT_TRUE(a.at("window").is_null());
      EXPECT_TRUE(a.at("chunk").is_null());
      EXPECT_TRUE(a.at("softcap").is_null());
    }
  }
}

TEST(ModelReport, JsonOfNonRotaryModelsNamesTheirTables) {
  const json t5 = json::parse(model_report_json(load("t5__t5-small.json")));
  EXPECT_EQ(t5.at("t5").at("num_buckets"), 32);
  EXPECT_TRUE(t5.at("layers").at(0).at("rope").is_null());
  const json gpt2 = json::parse(model_report_json(load("gpt2__gpt2-large.json")));
  EXPECT_EQ(gpt2.at("learned").at("table_rows"), 1024);
}

TEST(ModelReport, TableGroupsIdenticalLayersIntoRanges) {
  const std::string t = model_report_table(load("gemma3__gemma-3-27b-it.json"), 4096);
  EXPECT_NE(t.find("gemma3_text: 62 layers, 32 heads, max_position_embeddings 131072\n"), std::string::npos)
      << t;
  EXPECT_NE(
      t.find("layers 0-4, 6-10, 12-16, 18-22, 24-28, 30-34, 36-40, 42-46, 48-52, 54-58, 60-61: "
             "sliding_attention, rope default base 10000 dims [0, 128) of 128 half, causal, window 1024"),
      std::string::npos)
      << t;
  EXPECT_NE(t.find("layers 5, 11, 17, 23, 29, 35, 41, 47, 53, 59: full_attention, rope linear base 1e+06"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("layer 5 rope at seq_len 4096: attention_factor 1, inv_freq[0] 0.125"), std::string::npos)
      << t;
}

TEST(ModelReport, NegativeLengthIsRefusedByName) {
  const ModelPositions m = load("t5__t5-small.json");
  for (auto report : {&model_report_json, &model_report_table}) {
    try {
      report(m, -1);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("seq_len = -1 is invalid"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace posenc
