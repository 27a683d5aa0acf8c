// tests/attention_case.h: one attention problem (shape x mask x encoding) with its parameters,
// as the library's config and as the double-precision reference, shared by the forward, backward
// and KV-cache tests. The reference takes the parameters as one flat vector so that finite
// differences can perturb any of them.
#pragma once
#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "reference/attention.h"
#include "reference/rope.h"
#include "test_util.h"

namespace posenc::test {

enum class Enc {
  none,
  rope,
  alibi,
  alibi_symmetric,
  t5,
  t5_causal,
  clipped,
  rope_alibi,
  rope_t5,
  shaw,
  shaw_keys,
  rope_shaw,
  transformer_xl,
  transformer_xl_t5
};
inline const char* enc_name(Enc e) {
  static const char* names[] = {"none",      "rope",      "alibi",          "alibi_symmetric",  "t5",
                                "t5_causal", "clipped",   "rope_alibi",     "rope_t5",          "shaw",
                                "shaw_keys", "rope_shaw", "transformer_xl", "transformer_xl_t5"};
  return names[static_cast<int>(e)];
}
inline const std::vector<Enc>& all_encs() {
  static const std::vector<Enc> all = {
      Enc::none,      Enc::rope,      Enc::alibi,          Enc::alibi_symmetric,  Enc::t5,
      Enc::t5_causal, Enc::clipped,   Enc::rope_alibi,     Enc::rope_t5,          Enc::shaw,
      Enc::shaw_keys, Enc::rope_shaw, Enc::transformer_xl, Enc::transformer_xl_t5};
  return all;
}

struct Case {
  int64_t B, Q, K, H, Hkv, D;
  bool causal;
  int64_t window = 0;
  std::vector<int64_t> cu_q = {}, cu_k = {};  // packed when non-empty (B = 1)
  // Score-level mechanisms of today's families (any encoding combines with them):
  double softcap = 0;  // logit softcap (Gemma 2)
  bool sinks = false;  // learned sinks, one per head (gpt-oss)
  int64_t chunk = 0;   // chunked attention (Llama 4)
  // Query temperature: 0 none, 1 Llama 4's (attn_scale 0.1, floor_scale 8), 2 Ministral 3's
  // (beta 0.3, original context 16), 3 Qwen 1's log-n (seq_length 16): small floors so that the test
  // lengths cross several steps.
  int temperature = 0;
  // Multi-head latent attention shapes (DeepSeek-V2/V3): value heads of Dv (0: D), and RoPE on dims
  // [rope_offset, D) of the q/k head, in rope_layout.
  int64_t Dv = 0;
  int64_t rope_offset = 0;
  RopeLayout rope_layout = RopeLayout::half;
  // DeepSeek-V4's rotated values (AttentionConfig::rotate_values; RoPE encodings, Dv == D).
  bool rotate_values = false;
  // RoPE with an attention factor: yarn (factor 4 of 32 positions) with attention_factor 1.5.
  bool rope_attention_factor = false;
  int64_t shaw_max_distance = 6;  // Shaw's clipping distance (its encodings only)
  int64_t dv() const { return Dv > 0 ? Dv : D; }
};

// The parameters in one flat vector: q | k | v | relative table | a_k | a_v | u | v_xl | w_r | sinks.
struct Params {
  enum Part { q, k, v, table, a_k, a_v, u, v_xl, w_r, sinks, count };
};

class AttentionCase {
 public:
  AttentionCase(const Case& c, Enc e, uint32_t seed = 71) : c_(c), e_(e) {
    const int64_t nq = c.B * c.Q * c.H * c.D, nkv = c.B * c.K * c.Hkv * c.D;
    parts_[Params::q] = random_floats(nq, seed);
    parts_[Params::k] = random_floats(nkv, seed + 1);
    parts_[Params::v] = random_floats(c.B * c.K * c.Hkv * c.dv(), seed + 2);
    rc_.head_dim = c.D - c.rope_offset;
    rc_.layout = c.rope_layout;
    rc_.base = 500;  // small base: every pair turns visibly within these lengths
    if (c.rope_attention_factor) {
      rc_.scaling.type = RopeScalingType::yarn;
      rc_.scaling.factor = 4;
      rc_.scaling.original_max_position_embeddings = 32;
      rc_.scaling.attention_factor = 1.5;
    }
    if (uses_rope()) rope_ = std::make_unique<Rope>(rc_);
    if (e == Enc::alibi || e == Enc::alibi_symmetric || e == Enc::rope_alibi) {
      bias_.kind = AttentionBias::Kind::alibi;
      bias_.alibi.heads = c.H;
      bias_.alibi.symmetric = e == Enc::alibi_symmetric;
    } else if (e == Enc::t5 || e == Enc::t5_causal || e == Enc::clipped || e == Enc::rope_t5 ||
               e == Enc::transformer_xl_t5) {
      bias_.kind = AttentionBias::Kind::relative;
      bias_.relative = e == Enc::clipped ? RelativeBiasConfig::clipped(c.H, 5)
                                         : RelativeBiasConfig::t5(c.H, 16, 40, e != Enc::t5_causal);
      parts_[Params::table] = random_floats(bias_.relative.num_rows() * c.H, seed + 3, -2, 2);
    }
    if (e == Enc::shaw || e == Enc::shaw_keys || e == Enc::rope_shaw) {
      shaw_.max_distance = c.shaw_max_distance;
      shaw_.head_dim = c.D;
      parts_[Params::a_k] = random_floats(shaw_.num_rows() * c.D, seed + 4);
      if (e != Enc::shaw_keys) parts_[Params::a_v] = random_floats(shaw_.num_rows() * c.D, seed + 5);
    }
    if (e == Enc::transformer_xl || e == Enc::transformer_xl_t5) {
      xl_.d_model = 12;
      xl_.heads = c.H;
      xl_.head_dim = c.D;
      xl_.base = 100;
      parts_[Params::u] = random_floats(c.H * c.D, seed + 6, -0.5f, 0.5f);
      parts_[Params::v_xl] = random_floats(c.H * c.D, seed + 7, -0.5f, 0.5f);
      parts_[Params::w_r] = random_floats(c.H * c.D * xl_.d_model, seed + 8, -0.3f, 0.3f);
    }
    // Default positions, as the library defines them (the reference needs them explicitly).
    if (c.sinks) parts_[Params::sinks] = random_floats(c.H, seed + 9, -1.0f, 1.0f);
    if (c.cu_q.empty()) {
      for (int64_t b = 0; b < c.B; ++b) {
        for (int64_t i = 0; i < c.Q; ++i) q_pos_.push_back(c.K - c.Q + i);
        for (int64_t j = 0; j < c.K; ++j) k_pos_.push_back(j);
      }
    } else {
      q_pos_.resize(c.Q), k_pos_.resize(c.K), q_seq_.resize(c.Q), k_seq_.resize(c.K);
      for (size_t s = 0; s + 1 < c.cu_q.size(); ++s) {
        const int64_t nq_s = c.cu_q[s + 1] - c.cu_q[s], nk_s = c.cu_k[s + 1] - c.cu_k[s];
        for (int64_t i = 0; i < nq_s; ++i) q_pos_[c.cu_q[s] + i] = nk_s - nq_s + i, q_seq_[c.cu_q[s] + i] = s;
        for (int64_t j = 0; j < nk_s; ++j) k_pos_[c.cu_k[s] + j] = j, k_seq_[c.cu_k[s] + j] = s;
      }
    }
  }

  const Case& shape() const { return c_; }
  Enc enc() const { return e_; }
  bool uses_rope() const {
    return e_ == Enc::rope || e_ == Enc::rope_alibi || e_ == Enc::rope_t5 || e_ == Enc::rope_shaw;
  }
  std::vector<float>& part(Params::Part p) { return parts_[p]; }
  const std::vector<float>& part(Params::Part p) const { return parts_[p]; }
  const std::vector<int64_t>& q_pos() const { return q_pos_; }
  const std::vector<int64_t>& k_pos() const { return k_pos_; }
  std::string describe() const {
    std::ostringstream os;
    os << enc_name(e_) << " B" << c_.B << " Q" << c_.Q << " K" << c_.K << " H" << c_.H << "/" << c_.Hkv
       << " D" << c_.D << (c_.causal ? " causal" : "") << " window " << c_.window
       << (c_.cu_q.empty() ? "" : " packed")
       << (c_.softcap > 0 ? " softcap " + std::to_string(c_.softcap) : "") << (c_.sinks ? " sinks" : "")
       << (c_.chunk > 0 ? " chunk " + std::to_string(c_.chunk) : "")
       << (c_.temperature ? " temperature " + std::to_string(c_.temperature) : "")
       << (c_.Dv > 0 ? " Dv " + std::to_string(c_.Dv) : "")
       << (c_.rope_offset > 0 ? " rope from " + std::to_string(c_.rope_offset) : "")
       << (c_.rope_layout == RopeLayout::interleaved ? " interleaved" : "")
       << (c_.rotate_values ? " rotated values" : "") << (c_.rope_attention_factor ? " yarn 1.5" : "");
    return os.str();
  }

  AttentionConfig config() const {
    AttentionConfig cfg;
    cfg.causal = c_.causal;
    cfg.window = c_.window;
    cfg.chunk = c_.chunk;
    cfg.query_temperature = temperature();
    cfg.softcap = c_.softcap;
    if (c_.sinks) cfg.sinks = view(parts_[Params::sinks].data(), {c_.H});
    cfg.rope = rope_.get();
    cfg.rope_offset = c_.rope_offset;
    cfg.rotate_values = c_.rotate_values;
    cfg.bias = bias_;
    if (bias_.kind == AttentionBias::Kind::relative)
      cfg.bias.relative_table = view(parts_[Params::table].data(), {bias_.relative.num_rows(), c_.H});
    if (!parts_[Params::a_k].empty()) {
      AttentionShaw s;
      s.config = shaw_;
      s.a_k = view(parts_[Params::a_k].data(), {shaw_.num_rows(), c_.D});
      if (!parts_[Params::a_v].empty()) s.a_v = view(parts_[Params::a_v].data(), {shaw_.num_rows(), c_.D});
      cfg.shaw = s;
    }
    if (!parts_[Params::u].empty()) {
      AttentionTransformerXL x;
      x.config = xl_;
      x.u = view(parts_[Params::u].data(), {c_.H, c_.D});
      x.v = view(parts_[Params::v_xl].data(), {c_.H, c_.D});
      x.w_r = view(parts_[Params::w_r].data(), {c_.H * c_.D, xl_.d_model});
      cfg.transformer_xl = x;
    }
    return cfg;
  }
  AttentionInputs inputs() const {
    AttentionInputs in = qkv(view(parts_[Params::q].data(), {c_.B, c_.Q, c_.H, c_.D}),
                             view(parts_[Params::k].data(), {c_.B, c_.K, c_.Hkv, c_.D}),
                             view(parts_[Params::v].data(), {c_.B, c_.K, c_.Hkv, c_.dv()}));
    if (!c_.cu_q.empty()) {
      in.cu_seqlens_q = view(c_.cu_q.data(), {static_cast<int64_t>(c_.cu_q.size())});
      in.cu_seqlens_k = view(c_.cu_k.data(), {static_cast<int64_t>(c_.cu_k.size())});
    }
    return in;
  }

  // All parameters, flat, in double; and the offset of each part in it.
  std::vector<double> flat() const {
    std::vector<double> f;
    for (const auto& p : parts_) f.insert(f.end(), p.begin(), p.end());
    return f;
  }
  size_t offset(Params::Part part) const {
    size_t o = 0;
    for (int i = 0; i < part; ++i) o += parts_[i].size();
    return o;
  }

  // One part of the flat parameters `f` (layout of flat()).
  std::vector<double> slice(const std::vector<double>& f, Params::Part p) const {
    return std::vector<double>(f.begin() + offset(p), f.begin() + offset(p) + parts_[p].size());
  }

  // The reference problem (double) at the parameters `f`: everything but q, k, v.
  ref::AttentionProblem<double> reference_problem(const std::vector<double>& f) const {
    ref::AttentionProblem<double> p;
    p.B = c_.B, p.Q = c_.Q, p.K = c_.K, p.H = c_.H, p.Hkv = c_.Hkv, p.D = c_.D, p.Dv = c_.dv();
    p.causal = c_.causal;
    p.window = c_.window;
    p.chunk = c_.chunk;
    p.softcap = c_.softcap;
    p.sinks = slice(f, Params::sinks);
    p.scale = 1 / std::sqrt(static_cast<double>(c_.D));
    p.q_pos = q_pos_, p.k_pos = k_pos_, p.q_seq = q_seq_, p.k_seq = k_seq_;
    p.kind = bias_.kind;
    if (bias_.kind == AttentionBias::Kind::alibi) {
      p.alibi_slopes = alibi_slopes(bias_.alibi);
      p.alibi_symmetric = bias_.alibi.symmetric;
    } else if (bias_.kind == AttentionBias::Kind::relative) {
      p.relative = bias_.relative;
      p.relative_table = slice(f, Params::table);
    }
    if (!parts_[Params::a_k].empty()) {
      p.shaw_max_distance = shaw_.max_distance;
      p.shaw_a_k = slice(f, Params::a_k);
      p.shaw_a_v = slice(f, Params::a_v);
    }
    if (!parts_[Params::u].empty()) {
      p.transformer_xl_d_model = xl_.d_model;
      p.transformer_xl_base = xl_.base;
      p.transformer_xl_u = slice(f, Params::u), p.transformer_xl_v = slice(f, Params::v_xl);
      p.transformer_xl_w_r = slice(f, Params::w_r);
    }
    return p;
  }

  QueryTemperature temperature() const {
    if (c_.temperature == 1) return {QueryTemperature::Kind::llama4, 0.1, 8};
    if (c_.temperature == 2) return {QueryTemperature::Kind::ministral3, 0.3, 16};
    if (c_.temperature == 3) return {QueryTemperature::Kind::qwen_logn, 0, 16};
    return {};
  }

  // q (part q) or k (part k) as the reference attention sees it: rotated when the case uses RoPE,
  // and q times its temperature factor. inverse = true applies the transposed map (the backward:
  // gradients w.r.t. the unrotated, unscaled inputs; the factor is a scalar per row).
  std::vector<double> rotated(const std::vector<double>& x, Params::Part part, bool inverse = false) const {
    const bool is_q = part == Params::q;
    std::vector<double> y = uses_rope() ? rotated_rows(x, is_q, c_.D, inverse) : x;
    if (is_q && c_.temperature != 0) {
      const QueryTemperature t = temperature();
      const int64_t row = c_.H * c_.D;
      for (size_t bt = 0; bt < q_pos_.size(); ++bt)
        for (int64_t e = 0; e < row; ++e) y[bt * row + e] *= t.factor(q_pos_[bt]);
    }
    return y;
  }

  // Rows of `width` (q's or k's, v's or out's) with dims [rope_offset, D) of each head rotated at the
  // query (at_q) or key positions; inverse = true rotates back (the transposed map).
  std::vector<double> rotated_rows(const std::vector<double>& x, bool at_q, int64_t width,
                                   bool inverse) const {
    std::vector<double> y = x;
    const int64_t lo = c_.rope_offset, R = c_.D - lo, rows = static_cast<int64_t>(x.size()) / width;
    std::vector<double> sub(static_cast<size_t>(rows * R));
    for (int64_t r = 0; r < rows; ++r)
      std::copy(x.begin() + r * width + lo, x.begin() + r * width + lo + R, sub.begin() + r * R);
    sub = ref::rope<double>(rope_->frequencies(), rc_.layout, R, sub, at_q ? q_pos_ : k_pos_, c_.B,
                            at_q ? c_.Q : c_.K, at_q ? c_.H : c_.Hkv, inverse);
    for (int64_t r = 0; r < rows; ++r)
      std::copy(sub.begin() + r * R, sub.begin() + (r + 1) * R, y.begin() + r * width + lo);
    return y;
  }
  // v as the reference attention sees it: rotated at the key positions with rotate_values.
  std::vector<double> values(const std::vector<double>& f) const {
    const std::vector<double> v = slice(f, Params::v);
    return c_.rotate_values ? rotated_rows(v, false, c_.dv(), false) : v;
  }

  // The reference forward (double) at the parameters `f` (layout of flat()); with rotate_values the
  // output is rotated back at the query positions, o_t = R(-t) sum_s p_ts R(s) v_s.
  ref::AttentionResult<double> reference(const std::vector<double>& f) const {
    ref::AttentionResult<double> r =
        ref::attention<double>(reference_problem(f), rotated(slice(f, Params::q), Params::q),
                               rotated(slice(f, Params::k), Params::k), values(f));
    if (c_.rotate_values) r.out = rotated_rows(r.out, true, c_.dv(), true);
    return r;
  }

 private:
  Case c_;
  Enc e_;
  std::vector<float> parts_[Params::count];
  RopeConfig rc_;
  std::unique_ptr<Rope> rope_;
  AttentionBias bias_;
  ShawConfig shaw_;
  TransformerXLConfig xl_;
  std::vector<int64_t> q_pos_, k_pos_, q_seq_, k_seq_;
};

// Runs posenc and the reference on one case: outputs and lse must match.
inline void check_forward(const Case& c, Enc e, const std::string& target = "") {
  const AttentionCase ac(c, e);
  SCOPED_TRACE(ac.describe() + " " + target);
  const auto expected = ac.reference(ac.flat());
  std::vector<float> out(c.B * c.Q * c.H * c.dv(), 99.0f), lse(c.B * c.H * c.Q, 99.0f);
  attention_forward(ac.config(), ac.inputs(), view(out.data(), {c.B, c.Q, c.H, c.dv()}),
                    view(lse.data(), {c.B, c.H, c.Q}));
  EXPECT_TRUE(all_close(out, expected.out, kF32Reduction));
  EXPECT_TRUE(all_close(lse, expected.lse, kF32Reduction));
  for (float x : out) ASSERT_FALSE(std::isnan(x));
}

}  // namespace posenc::test
