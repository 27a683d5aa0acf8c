// tests/rope_cases.h: one grid of RoPE cases, real model configurations (sizes of B, T, H scaled
// down; head_dim, rotary_dim, base and scaling as published) plus edge cases. Used by
// tests/test_rope.cc and, with full sizes, by bench/bench_rope.cc.
#pragma once
#include <string>
#include <vector>

#include "posenc/rope.h"

namespace posenc::test {

struct RopeCase {
  std::string name;
  RopeConfig config;
  int64_t batch, tokens, heads, kv_heads;
  int64_t first_position = 0;  // e.g. a decode step deep into a KV cache
};

inline std::vector<RopeCase> rope_cases() {
  std::vector<RopeCase> cases;
  auto add = [&](std::string name, RopeConfig c, int64_t b, int64_t t, int64_t h, int64_t kvh,
                 int64_t first = 0) {
    cases.push_back({std::move(name), std::move(c), b, t, h, kvh, first});
  };
  {  // Llama 3.1 8B: head_dim 128, theta 500000, llama3 scaling, GQA 32/8
    RopeConfig c;
    c.head_dim = 128;
    c.base = 500000;
    c.max_position_embeddings = 131072;
    c.scaling.type = RopeScalingType::llama3;
    c.scaling.factor = 8;
    c.scaling.low_freq_factor = 1;
    c.scaling.high_freq_factor = 4;
    c.scaling.original_max_position_embeddings = 8192;
    add("llama3.1", c, 2, 9, 4, 1);
    add("llama3.1_decode_at_100k", c, 1, 1, 4, 1, 100000);
  }
  {  // Qwen2-VL: M-RoPE, mrope_section {16, 24, 24}, theta 1e6
    RopeConfig c;
    c.head_dim = 128;
    c.base = 1e6;
    c.multimodal = RopeMultimodal::mrope;
    c.mrope_section = {16, 24, 24};
    add("qwen2vl_mrope", c, 2, 7, 3, 1);
    c.multimodal = RopeMultimodal::mrope_interleaved;
    c.mrope_section = {24, 20, 20};
    add("qwen3vl_mrope_interleaved", c, 1, 5, 2, 2);
  }
  {  // Phi-3 mini 128k: LongRoPE, head_dim 96
    RopeConfig c;
    c.head_dim = 96;
    c.max_position_embeddings = 131072;
    c.scaling.type = RopeScalingType::longrope;
    c.scaling.original_max_position_embeddings = 4096;
    for (int j = 0; j < 48; ++j) {
      c.scaling.short_factor.push_back(1.0 + 0.01 * j);
      c.scaling.long_factor.push_back(1.0 + 0.5 * j);
    }
    add("phi3_longrope_short", c, 1, 6, 3, 3);
    add("phi3_longrope_long", c, 1, 3, 2, 2, 5000);
  }
  {  // GPT-J: interleaved, rotary_dim 64 of head_dim 256
    RopeConfig c;
    c.head_dim = 256;
    c.rotary_dim = 64;
    c.layout = RopeLayout::interleaved;
    add("gptj_partial_interleaved", c, 2, 4, 2, 2);
  }
  {  // Pythia / GPT-NeoX: half layout, rotary_pct 0.25 of head_dim 64 -> 16
    RopeConfig c;
    c.head_dim = 64;
    c.rotary_dim = 16;
    add("neox_partial_half", c, 1, 11, 3, 3);
  }
  {  // YaRN (Qwen2.5 long context): factor 4 over 32768, head_dim 128, theta 1e6
    RopeConfig c;
    c.head_dim = 128;
    c.base = 1e6;
    c.max_position_embeddings = 32768;
    c.scaling.type = RopeScalingType::yarn;
    c.scaling.factor = 4;
    c.scaling.original_max_position_embeddings = 32768;
    add("qwen2.5_yarn", c, 1, 5, 2, 2, 70000);
  }
  {  // dynamic NTK beyond max_position_embeddings
    RopeConfig c;
    c.head_dim = 64;
    c.max_position_embeddings = 16;
    c.scaling.type = RopeScalingType::dynamic;
    c.scaling.factor = 2;
    add("dynamic_ntk_grown", c, 1, 40, 2, 2);
  }
  {  // linear interpolation, 2-D axial image patches
    RopeConfig c;
    c.head_dim = 64;
    c.scaling.type = RopeScalingType::linear;
    c.scaling.factor = 4;
    add("linear", c, 1, 5, 2, 2);
    RopeConfig a;
    a.head_dim = 32;
    a.base = 100;
    a.multimodal = RopeMultimodal::axial_2d;
    add("axial_2d", a, 2, 6, 2, 2);
  }
  {  // edge cases: head_dim 2, odd pair counts, dims not a multiple of any vector width, length 1
    for (int64_t d : {2, 6, 10, 34, 40, 66, 80, 130}) {
      RopeConfig c;
      c.head_dim = d;
      add("half_d" + std::to_string(d), c, 1, 3, 2, 1);
      c.layout = RopeLayout::interleaved;
      add("interleaved_d" + std::to_string(d), c, 1, 2, 1, 2);
    }
    RopeConfig odd;  // odd head_dim with an even rotary part
    odd.head_dim = 9;
    odd.rotary_dim = 6;
    add("odd_head_dim_9_rotary_6", odd, 2, 3, 2, 1);
    odd.layout = RopeLayout::interleaved;
    add("odd_head_dim_9_rotary_6_interleaved", odd, 1, 3, 1, 1);
    RopeConfig c;
    c.head_dim = 24;
    c.rotary_dim = 10;
    c.frequency_divisors = {1, 2, 3, 4, 5};
    add("divisors_partial_odd_pairs", c, 3, 1, 1, 1);
    add("length1_batch1", c, 1, 1, 1, 1, 7);
  }
  {  // NanoChat (d32: head_dim 128, theta 10000): every angle -p theta (RopeConfig::reversed)
    RopeConfig c;
    c.head_dim = 128;
    c.reversed = true;
    add("nanochat_reversed", c, 2, 5, 3, 3, 300);
    RopeConfig p;  // reversed with an interleaved partial rotation
    p.head_dim = 12;
    p.rotary_dim = 8;
    p.layout = RopeLayout::interleaved;
    p.reversed = true;
    add("reversed_partial_interleaved", p, 1, 4, 2, 1);
  }
  return cases;
}

// Positions (S, B, T): streams differ (t, h, w patterns), batches differ by an offset.
inline std::vector<int64_t> case_positions(const RopeCase& c) {
  const int64_t s_count = c.config.num_position_streams();
  std::vector<int64_t> p(s_count * c.batch * c.tokens);
  for (int64_t s = 0; s < s_count; ++s)
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t t = 0; t < c.tokens; ++t)
        p[(s * c.batch + b) * c.tokens + t] = c.first_position + 3 * b + (s == 0 ? t : (t * (s + 1)) % 5);
  return p;
}

inline ConstTensorView positions_view(const RopeCase& c, const std::vector<int64_t>& p) {
  if (c.config.num_position_streams() == 1) return view(p.data(), {c.batch, c.tokens});
  return view(p.data(), {c.config.num_position_streams(), c.batch, c.tokens});
}

}  // namespace posenc::test
