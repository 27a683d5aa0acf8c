// src/cpu/relative_terms.h: CPU loops of the vector-valued relative encodings (Shaw, Transformer-XL).
// Views arrive validated; strides are in elements.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "posenc/tensor.h"

namespace posenc::cpu {

// A (B, H, Q, K) logits-like tensor and a (B, Q|K, H, D) head tensor, as pointer + strides.
struct Logits {
  float* data = nullptr;
  const float* cdata = nullptr;
  Dims s{};  // b, h, i, j
};
struct Heads {
  float* data = nullptr;
  const float* cdata = nullptr;
  Dims s{};  // b, t, h, d
};
struct Table {
  float* data = nullptr;
  const float* cdata = nullptr;
  int64_t s_row = 0, s_col = 0;
};

// Packing validated views (front ends only).
inline Heads heads_of(const ConstTensorView& v) { return {nullptr, v.ptr<float>(), v.strides}; }
inline Heads heads_of(const TensorView& v) { return {v.ptr<float>(), v.ptr<float>(), v.strides}; }
inline Logits logits_of(const ConstTensorView& v) { return {nullptr, v.ptr<float>(), v.strides}; }
inline Logits logits_of(const TensorView& v) { return {v.ptr<float>(), v.ptr<float>(), v.strides}; }
inline Table table_of(const ConstTensorView& v) { return {nullptr, v.ptr<float>(), v.strides[0], v.strides[1]}; }
inline Table table_of(const TensorView& v) { return {v.ptr<float>(), v.ptr<float>(), v.strides[0], v.strides[1]}; }

struct ShawShapes {
  int64_t batch, heads, nq, nk, dim, max_distance;
  const std::vector<int64_t>* q_pos;
  const std::vector<int64_t>* k_pos;
};
void shaw_key_logits(const ShawShapes& sh, Table a_k, Heads q, Logits out);
void shaw_key_logits_backward(const ShawShapes& sh, Table a_k, Heads q, Logits grad, Heads grad_q, Table grad_a_k);
void shaw_value_output(const ShawShapes& sh, Table a_v, Logits probs, Heads out);
void shaw_value_output_backward(const ShawShapes& sh, Table a_v, Logits probs, Heads grad_out, Logits grad_probs,
                                Table grad_a_v);

struct XLShapes {
  int64_t batch, heads, nq, nk, dim, d_model;
  double base;
  const std::vector<int64_t>* q_pos;
  const std::vector<int64_t>* k_pos;
};
struct XLParams {
  Heads q, k;
  Table u, v, w_r;  // u, v: (H, D); w_r: (H*D, d_model)
};
void transformer_xl_logits(const XLShapes& sh, const XLParams& p, Logits out);

// Maps delta = q_pos - k_pos to its index among the distinct deltas of a block: a dense range when
// the positions are ordinary sequences, else the sorted distinct values.
struct DeltaIndex {
  std::vector<int64_t> deltas;
  int64_t lo = 0;
  bool dense = true;
  DeltaIndex(const std::vector<int64_t>& q, const std::vector<int64_t>& k);
  int64_t operator()(int64_t delta) const {
    if (dense) return delta - lo;
    return std::lower_bound(deltas.begin(), deltas.end(), delta) - deltas.begin();
  }
  int64_t size() const { return static_cast<int64_t>(deltas.size()); }
};
// R (n, d_model) in double: [sin(delta w_i) | cos(delta w_i)], w_i = base^(-2i / d_model).
std::vector<double> xl_sinusoids(const XLShapes& sh, const DeltaIndex& idx);
// rproj (H, n, D) = W_R,h R_delta.
std::vector<double> xl_project(const XLShapes& sh, Table w_r, const std::vector<double>& r, int64_t n);
void transformer_xl_logits_backward(const XLShapes& sh, const XLParams& p, Logits grad, const XLParams& grads);

}  // namespace posenc::cpu
