// lab/attention.cc: see attention.h.
#include "attention.h"

#include <algorithm>
#include <cmath>

#include "kernels.h"
#include "posenc/bias.h"
#include "posenc/error.h"

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
      c.query_temperature.kind != QueryTemperature::Kind::none || c.shaw || c.transformer_xl ||
      c.round_probabilities || c.rotate_values)
    return false;
  if (T < 1 || T > kMaxKernelWindow) return false;
  if (c.rope) {
    const RopeConfig& r = c.rope->config();
    if (c.rope_offset != 0 || r.head_dim != D || r.num_position_streams() != 1) return false;
  }
  return true;
}

namespace {

// The kernels' view of one call: q and k rotated into `qk_rot` with RoPE, the bias row in `bias`.
kernels::Attention prepare(const AttentionConfig& c, const float* qkv, int64_t B, int64_t T, int64_t H,
                           int64_t D, ConstTensorView positions, std::vector<float>& qk_rot,
                           std::vector<float>& bias, std::vector<int64_t>& last) {
  const int64_t C = H * D;
  kernels::Attention a;
  a.B = B, a.T = T, a.H = H, a.D = D;
  a.scale = static_cast<float>(c.scale.value_or(1.0 / std::sqrt(static_cast<double>(D))));
  a.q = {qkv, 3 * C}, a.k = {qkv + C, 3 * C}, a.v = {qkv + 2 * C, 3 * C};
  if (c.rope) {
    qk_rot.resize(static_cast<size_t>(B * T * 2 * C));
    c.rope->forward(head_view(qkv, 3, 0, B, T, H, D), head_view(qk_rot.data(), 2, 0, B, T, H, D), positions);
    c.rope->forward(head_view(qkv, 3, 1, B, T, H, D), head_view(qk_rot.data(), 2, 1, B, T, H, D), positions);
    a.q = {qk_rot.data(), 2 * C}, a.k = {qk_rot.data() + C, 2 * C};
  }
  if (c.bias.kind != AttentionBias::Kind::none) {
    // The logits' bias as seen from the last query: row h = b_h(T-1), ..., b_h(0) (kernels.h).
    bias.resize(static_cast<size_t>(H * T));
    last.assign(1, T - 1);
    const TensorView row = view(bias.data(), {H, 1, T});
    if (c.bias.kind == AttentionBias::Kind::alibi)
      alibi_bias(c.bias.alibi, view(last.data(), {1}), positions, row);
    else
      relative_bias(c.bias.relative, c.bias.relative_table, view(last.data(), {1}), positions, row);
    a.bias = bias.data();
  }
  return a;
}

}  // namespace

void LabAttention::forward(const AttentionConfig& config, const float* qkv, int64_t B, int64_t T, int64_t H,
                           int64_t D, ConstTensorView positions, float* out, float* lse) {
  if (!on_lab_kernels(config, T, D)) {
    posenc::attention_forward(config,
                              posenc::qkv(head_view(qkv, 3, 0, B, T, H, D), head_view(qkv, 3, 1, B, T, H, D),
                                          head_view(qkv, 3, 2, B, T, H, D)),
                              view(out, {B, T, H, D}), view(lse, {B, H, T}));
    return;
  }
  const kernels::Attention a = prepare(config, qkv, B, T, H, D, positions, qk_rot_, bias_, last_);
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
  for (const TensorView* g :
       {&param_grads.shaw_a_k, &param_grads.shaw_a_v, &param_grads.transformer_xl_u,
        &param_grads.transformer_xl_v, &param_grads.transformer_xl_w_r, &param_grads.sinks})
    if (g->data != nullptr)
      throw Error(
          "lab attention: a Shaw, Transformer-XL or sink gradient is given for a configuration "
          "without them");
  const kernels::Attention a = prepare(config, qkv, B, T, H, D, positions, qk_rot_, bias_, last_);
  float* dbias = nullptr;
  if (relative && table.data != nullptr) {
    dbias_.assign(static_cast<size_t>(H * T), 0.0f);
    dbias = dbias_.data();
  }
  kernels::attention_backward(a, {out, C}, lse, {dout, C}, {dqkv, 3 * C}, {dqkv + C, 3 * C},
                              {dqkv + 2 * C, 3 * C}, dbias);
  if (config.rope) {  // the gradient w.r.t. the unrotated q and k: the rotation by -theta
    config.rope->backward(head_view(dqkv, 3, 0, B, T, H, D), positions);
    config.rope->backward(head_view(dqkv, 3, 1, B, T, H, D), positions);
  }
  if (dbias)
    relative_bias_backward(config.bias.relative, view(dbias_.data(), {H, 1, T}), view(last_.data(), {1}),
                           positions, table);
}

}  // namespace posenc::lab
