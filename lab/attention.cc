// lab/attention.cc: see attention.h.
#include "attention.h"

#include <algorithm>
#include <cmath>

#include "kernels.h"
#include "posenc/bias.h"
#include "posenc/error.h"
#include "src/cpu/transformer_xl.h"
#include "src/strided.h"

namespace posenc::lab {

namespace {

// Part `which` (0 q, 1 k, 2 v) of a (B, T, parts * C) buffer as a (B, T, H, D) view.
template <typename F>
auto head_view(F* x, int64_t parts, int64_t which, int64_t B, int64_t T, int64_t H, int64_t D) {
  const int64_t C = H * D;
  return strided_view(x + which * C, {B, T, H, D}, {T * parts * C, parts * C, D, 1});
}

}  // namespace

bool on_lab_kernels(const AttentionConfig& c, int64_t T, int64_t D) {
  if (!c.causal || c.window != 0 || c.chunk != 0 || c.softcap != 0 || c.sinks.data != nullptr ||
      c.query_temperature.kind != QueryTemperature::Kind::none || c.round_probabilities || c.rotate_values)
    return false;
  if (T < 1 || T > kMaxKernelWindow) return false;
  if (c.shaw && c.transformer_xl) return false;
  // Shaw's and Transformer-XL's vectors with RoPE's rotation stay with posenc's attention.
  if ((c.shaw || c.transformer_xl) && c.rope) return false;
  if (c.shaw && (c.shaw->config.head_dim != D || c.shaw->a_k.data == nullptr)) return false;
  if (c.transformer_xl && c.transformer_xl->config.head_dim != D) return false;
  if (c.rope) {
    const RopeConfig& r = c.rope->config();
    if (c.rope_offset != 0 || r.head_dim != D || r.num_position_streams() != 1 ||
        r.layout != RopeLayout::half)
      return false;
  }
  return true;
}

namespace {

// Shaw's table `table` (2K + 1, D), row r for k_pos - q_pos = r - K clipped to [-K, K], in the kernels'
// order (kernels.h): out (T, D), row m for the distance T-1-m (clipped at K).
void shaw_rows(const AttentionShaw& shaw, ConstTensorView table, int64_t T, int64_t D,
               std::vector<float>& out) {
  const int64_t K = shaw.config.max_distance;
  const Strided<const float, 2> rows = strided<2>(table);
  out.resize(static_cast<size_t>(T * D));
  for (int64_t m = 0; m < T; ++m) {
    const int64_t r = K - std::min(T - 1 - m, K);
    for (int64_t d = 0; d < D; ++d) out[static_cast<size_t>(m * D + d)] = rows(r, d);
  }
}

}  // namespace

kernels::Attention LabAttention::prepare(const AttentionConfig& c, const float* qkv, int64_t B, int64_t T,
                                         int64_t H, int64_t D, ConstTensorView positions) {
  const int64_t C = H * D;
  kernels::Attention a;
  a.B = B, a.T = T, a.H = H, a.D = D;
  a.scale = static_cast<float>(c.scale.value_or(1.0 / std::sqrt(static_cast<double>(D))));
  a.q = {qkv, 3 * C}, a.k = {qkv + C, 3 * C}, a.v = {qkv + 2 * C, 3 * C};
  if (c.rope) {  // q and k, adjacent in qkv: 2H heads of each token, rotated by its token's tables
    const int64_t P = c.rope->config().effective_rotary_dim() / 2;
    rope_cos_.resize(static_cast<size_t>(T * P));
    rope_sin_.resize(static_cast<size_t>(T * P));
    c.rope->cos_sin(positions, view(rope_cos_.data(), {T, P}), view(rope_sin_.data(), {T, P}));
    qk_rot_.resize(static_cast<size_t>(B * T * 2 * C));
    kernels::rope_rotate(rope_cos_.data(), rope_sin_.data(), P, {qkv, 3 * C}, {qk_rot_.data(), 2 * C}, B, T,
                         2 * H, D);
    a.q = {qk_rot_.data(), 2 * C}, a.k = {qk_rot_.data() + C, 2 * C};
  }
  if (c.bias.kind != AttentionBias::Kind::none) {
    // The logits' bias as seen from the last query: row h = b_h(T-1), ..., b_h(0) (kernels.h).
    bias_.resize(static_cast<size_t>(H * T));
    last_.assign(1, T - 1);
    const TensorView row = view(bias_.data(), {H, 1, T});
    if (c.bias.kind == AttentionBias::Kind::alibi)
      alibi_bias(c.bias.alibi, view(last_.data(), {1}), positions, row);
    else
      relative_bias(c.bias.relative, c.bias.relative_table, view(last_.data(), {1}), positions, row);
    a.bias = bias_.data();
  }
  if (c.shaw) {  // p = q; one table for every head
    shaw_rows(*c.shaw, c.shaw->a_k, T, D, table_key_);
    a.p = a.q, a.rel_key = table_key_.data(), a.rel_head_stride = 0;
    if (c.shaw->a_v.data) {
      shaw_rows(*c.shaw, c.shaw->a_v, T, D, table_value_);
      a.rel_value = table_value_.data();
    }
  }
  if (c.transformer_xl) {  // q + u_h against the keys, q + v_h against W_R,h R
    const AttentionTransformerXL& xl = *c.transformer_xl;
    if (xl.config.heads != H)
      throw Error("lab attention: transformer_xl.config.heads = " + std::to_string(xl.config.heads) +
                  " differs from the attention's " + std::to_string(H) + " heads");
    shifted_.resize(static_cast<size_t>(B * T * 2 * C));
    cpu::transformer_xl_shift_queries(strided<3>(head_view(qkv, 3, 0, B, T, H, D)), D, strided<2>(xl.u),
                                      strided<2>(xl.v), shifted_.data(), shifted_.data() + B * T * C);
    a.q = {shifted_.data(), C}, a.p = {shifted_.data() + B * T * C, C};
    deltas_.resize(static_cast<size_t>(T));
    for (int64_t m = 0; m < T; ++m) deltas_[static_cast<size_t>(m)] = m;
    sinusoids_ = cpu::transformer_xl_sinusoids(deltas_, xl.config.d_model, xl.config.base);
    const std::vector<double> rproj =  // (H, T, D) by distance
        cpu::transformer_xl_project(H, D, xl.config.d_model, strided<2>(xl.w_r), sinusoids_, T);
    table_key_.resize(static_cast<size_t>(H * T * D));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t m = 0; m < T; ++m)
        for (int64_t d = 0; d < D; ++d)
          table_key_[static_cast<size_t>((h * T + m) * D + d)] =
              static_cast<float>(rproj[static_cast<size_t>((h * T + T - 1 - m) * D + d)]);
    a.rel_key = table_key_.data(), a.rel_head_stride = T * D;
  }
  return a;
}

void LabAttention::forward(const AttentionConfig& config, const float* qkv, int64_t B, int64_t T, int64_t H,
                           int64_t D, ConstTensorView positions, float* out, float* lse) {
  if (!on_lab_kernels(config, T, D)) {
    posenc::attention_forward(config,
                              posenc::qkv(head_view(qkv, 3, 0, B, T, H, D), head_view(qkv, 3, 1, B, T, H, D),
                                          head_view(qkv, 3, 2, B, T, H, D)),
                              view(out, {B, T, H, D}), view(lse, {B, H, T}));
    return;
  }
  const kernels::Attention a = prepare(config, qkv, B, T, H, D, positions);
  kernels::attention_forward(a, {out, H * D}, lse);
}

void LabAttention::backward(const AttentionConfig& config, const float* qkv, int64_t B, int64_t T, int64_t H,
                            int64_t D, ConstTensorView positions, const float* out, const float* lse,
                            const float* dout, float* dqkv, const AttentionGrads& param_grads) {
  const int64_t C = H * D;
  const auto q = head_view(qkv, 3, 0, B, T, H, D), k = head_view(qkv, 3, 1, B, T, H, D),
             v = head_view(qkv, 3, 2, B, T, H, D);
  if (!on_lab_kernels(config, T, D)) {  // posenc's backward accumulates: from zero
    std::fill(dqkv, dqkv + B * T * 3 * C, 0.0f);
    AttentionGrads grads = param_grads;
    grads.q = head_view(dqkv, 3, 0, B, T, H, D);
    grads.k = head_view(dqkv, 3, 1, B, T, H, D);
    grads.v = head_view(dqkv, 3, 2, B, T, H, D);
    posenc::attention_backward(config, posenc::qkv(q, k, v), view(out, {B, T, H, D}), view(lse, {B, H, T}),
                               view(dout, {B, T, H, D}), grads);
    return;
  }
  const bool relative = config.bias.kind == AttentionBias::Kind::relative;
  const TensorView& table = param_grads.relative_table;
  if (table.data != nullptr && !relative)
    throw Error("lab attention: a relative_table gradient is given but the attention has no relative bias");
  const bool shaw = config.shaw.has_value(), xl = config.transformer_xl.has_value();
  if (param_grads.sinks.data != nullptr)
    throw Error("lab attention: a sinks gradient is given for a configuration without sinks");
  if (!shaw && (param_grads.shaw_a_k.data != nullptr || param_grads.shaw_a_v.data != nullptr))
    throw Error("lab attention: a Shaw gradient is given for a configuration without Shaw");
  if (shaw && param_grads.shaw_a_v.data != nullptr && config.shaw->a_v.data == nullptr)
    throw Error("lab attention: a shaw_a_v gradient is given for a Shaw configuration without a_v");
  if (!xl && (param_grads.transformer_xl_u.data != nullptr || param_grads.transformer_xl_v.data != nullptr ||
              param_grads.transformer_xl_w_r.data != nullptr))
    throw Error("lab attention: a Transformer-XL gradient is given for a configuration without it");
  const kernels::Attention a = prepare(config, qkv, B, T, H, D, positions);
  float* dbias = nullptr;
  if (relative && table.data != nullptr) {
    dbias_.assign(static_cast<size_t>(H * T), 0.0f);
    dbias = dbias_.data();
  }
  kernels::RelativeGrads rel;
  if (shaw || xl) {
    dp_.resize(static_cast<size_t>(B * T * C));
    rel.dp = {dp_.data(), C};
    if (param_grads.shaw_a_k.data != nullptr || param_grads.transformer_xl_w_r.data != nullptr) {
      dtable_key_.assign(static_cast<size_t>(H * T * D), 0.0f);
      rel.rel_key = dtable_key_.data();
    }
    if (param_grads.shaw_a_v.data != nullptr) {
      dtable_value_.assign(static_cast<size_t>(H * T * D), 0.0f);
      rel.rel_value = dtable_value_.data();
    }
  }
  kernels::attention_backward(a, {out, C}, lse, {dout, C}, {dqkv, 3 * C}, {dqkv + C, 3 * C},
                              {dqkv + 2 * C, 3 * C}, dbias, rel);
  if (config.rope) {  // the gradient w.r.t. the unrotated q and k: the rotation by -theta
    for (float& s : rope_sin_) s = -s;
    kernels::rope_rotate(rope_cos_.data(), rope_sin_.data(), config.rope->config().effective_rotary_dim() / 2,
                         {dqkv, 3 * C}, {dqkv, 3 * C}, B, T, 2 * H, D);
  }
  if (dbias)
    relative_bias_backward(config.bias.relative, view(dbias_.data(), {H, 1, T}), view(last_.data(), {1}),
                           positions, table);
  if (shaw) shaw_backward(*config.shaw, param_grads, B, T, H, D, dqkv);
  if (xl) transformer_xl_backward(*config.transformer_xl, param_grads, B, T, H, D, dqkv);
}

// dq += dp (the position queries are q); the tables' rows gather the gradients of the rows that read
// them: row r of a^K and a^V from the kernels' rows m with K - min(T-1-m, K) = r, over every head.
void LabAttention::shaw_backward(const AttentionShaw& shaw, const AttentionGrads& grads, int64_t B, int64_t T,
                                 int64_t H, int64_t D, float* dqkv) const {
  const int64_t C = H * D, K = shaw.config.max_distance;
  for (int64_t n = 0; n < B * T; ++n)
    for (int64_t x = 0; x < C; ++x) dqkv[n * 3 * C + x] += dp_[static_cast<size_t>(n * C + x)];
  auto gather = [&](const std::vector<float>& rows, const TensorView& grad) {
    const Strided<float, 2> g = strided<2>(grad);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t m = 0; m < T; ++m) {
        const int64_t r = K - std::min(T - 1 - m, K);
        for (int64_t d = 0; d < D; ++d) g(r, d) += rows[static_cast<size_t>((h * T + m) * D + d)];
      }
  };
  if (grads.shaw_a_k.data) gather(dtable_key_, grads.shaw_a_k);
  if (grads.shaw_a_v.data) gather(dtable_value_, grads.shaw_a_v);
}

// With q_u = q + u_h and q_v = q + v_h: the kernels' dq is d q_u (whose sum over tokens is du), dp is
// d q_v (whose sum is dv), and dq is their sum; d W_R from d rproj (H, T, D) by distance, the kernels'
// rows reversed.
void LabAttention::transformer_xl_backward(const AttentionTransformerXL& xl, const AttentionGrads& grads,
                                           int64_t B, int64_t T, int64_t H, int64_t D, float* dqkv) {
  const int64_t C = H * D;
  std::vector<double> du(static_cast<size_t>(C), 0.0), dv(static_cast<size_t>(C), 0.0);
  for (int64_t n = 0; n < B * T; ++n)
    for (int64_t x = 0; x < C; ++x) {
      float& g = dqkv[n * 3 * C + x];
      const float p = dp_[static_cast<size_t>(n * C + x)];
      du[static_cast<size_t>(x)] += g;
      dv[static_cast<size_t>(x)] += p;
      g += p;
    }
  for (const auto& [grad, sums] :
       {std::pair{&grads.transformer_xl_u, &du}, std::pair{&grads.transformer_xl_v, &dv}}) {
    if (grad->data == nullptr) continue;
    const Strided<float, 2> g = strided<2>(*grad);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) g(h, d) += static_cast<float>((*sums)[static_cast<size_t>(h * D + d)]);
  }
  if (grads.transformer_xl_w_r.data) {
    std::vector<float> d_rproj(static_cast<size_t>(H * T * D));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t m = 0; m < T; ++m)
        std::copy_n(dtable_key_.data() + (h * T + m) * D, D, d_rproj.data() + (h * T + T - 1 - m) * D);
    cpu::transformer_xl_project_backward(H, D, xl.config.d_model, d_rproj, sinusoids_, T,
                                         strided<2>(grads.transformer_xl_w_r));
  }
}

}  // namespace posenc::lab
