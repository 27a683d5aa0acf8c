// src/rope.cc: RoPE front end. Validates views and positions, computes the frequency table on
// the host (src/frequencies.cc) and hands rows to the device backend.
#include <algorithm>

#include "check.h"
#include "cpu/kernels.h"
#include "posenc/rope.h"

namespace posenc {
using detail::check_view;
using detail::fail;

namespace {
constexpr const char* kOp = "rope";

struct Prepared {
  std::vector<int64_t> positions;  // (S, B, T)
  const RopeFrequencies* freq = nullptr;  // the Rope's cached table, or `computed`
  RopeFrequencies computed;
};

Prepared prepare(const Rope& rope, const ConstTensorView& positions, int64_t batch, int64_t tokens,
                 const RopeCall& call) {
  const RopeConfig& cfg = rope.config();
  Prepared p;
  p.positions = detail::gather_positions(kOp, positions, cfg.num_position_streams(), batch, tokens);
  detail::check_position_range(kOp, p.positions);
  int64_t seq_len = 0;
  if (call.seq_len) {
    if (*call.seq_len < 0) detail::fail_arg(kOp, "seq_len", *call.seq_len, "must be >= 0");
    seq_len = *call.seq_len;
  } else if (!p.positions.empty()) {
    seq_len = *std::max_element(p.positions.begin(), p.positions.end()) + 1;
  }
  p.freq = rope.cached_frequencies(seq_len);
  if (p.freq == nullptr) {
    p.computed = rope_frequencies(cfg, seq_len);
    p.freq = &p.computed;
  }
  return p;
}

cpu::AngleTable angle_table(const RopeConfig& cfg, const Prepared& p, bool inverse) {
  cpu::AngleTable a;
  const int64_t pairs = cfg.effective_rotary_dim() / 2;
  a.inv_freq = p.freq->inv_freq.data();
  a.stream = cfg.num_position_streams() > 1 ? p.freq->stream.data() : nullptr;
  a.pairs = pairs;
  a.positions = p.positions.data();
  a.scale = p.freq->attention_factor;
  a.inverse = inverse;
  return a;
}

void check_heads_view(const RopeConfig& cfg, std::string_view name, const ViewShape& v, const void* data) {
  check_view(kOp, name, v, DType::f32, {-1, -1, -1, cfg.head_dim}, data);
  detail::check_unit_last_stride(kOp, name, v);
}

cpu::HeadRows head_rows(const ViewShape& in_v, const float* in, const ViewShape& out_v, float* out) {
  cpu::HeadRows r;
  r.in = in;
  r.out = out;
  r.heads = in_v.shape[2];
  r.dim = in_v.shape[3];
  r.in_stride_b = in_v.strides[0];
  r.in_stride_t = in_v.strides[1];
  r.in_stride_h = in_v.strides[2];
  r.out_stride_b = out_v.strides[0];
  r.out_stride_t = out_v.strides[1];
  r.out_stride_h = out_v.strides[2];
  return r;
}

void run(const Rope& rope, ConstTensorView x, TensorView out, ConstTensorView positions,
         const RopeCall& call, bool inverse) {
  const RopeConfig& cfg = rope.config();
  check_heads_view(cfg, "x", x, x.data);
  check_heads_view(cfg, "out", out, out.data);
  if (out.shape != x.shape) fail(kOp, "out has shape ", out.shape_string(), ", expected the shape of x ", x.shape_string());
  const Prepared p = prepare(rope, positions, x.shape[0], x.shape[1], call);
  const cpu::HeadRows rows = head_rows(x, x.ptr<float>(), out, out.ptr<float>());
  cpu::rope_rotate(angle_table(cfg, p, inverse), {x.shape[0], x.shape[1]},
                   cfg.layout == RopeLayout::half ? cpu::PairLayout::half : cpu::PairLayout::interleaved, &rows, 1);
}
}  // namespace

Rope::Rope(RopeConfig config) : config_(std::move(config)) {
  short_ = rope_frequencies(config_, 0);
  if (config_.scaling.type == RopeScalingType::longrope) long_ = rope_frequencies(config_, config_.original_context() + 1);
}

const RopeFrequencies* Rope::cached_frequencies(int64_t seq_len) const {
  switch (config_.scaling.type) {
    case RopeScalingType::dynamic:  // the NTK base grows with every length past max_position_embeddings
      return seq_len > config_.max_position_embeddings ? nullptr : &short_;
    case RopeScalingType::longrope: return seq_len > config_.original_context() ? &long_ : &short_;
    default: return &short_;
  }
}

RopeFrequencies Rope::frequencies(int64_t seq_len) const {
  const RopeFrequencies* cached = cached_frequencies(seq_len);
  return cached ? *cached : rope_frequencies(config_, seq_len);
}

void Rope::forward(TensorView x, ConstTensorView positions, RopeCall call) const {
  run(*this, x, x, positions, call, false);
}
void Rope::forward(ConstTensorView x, TensorView out, ConstTensorView positions, RopeCall call) const {
  run(*this, x, out, positions, call, false);
}
void Rope::backward(TensorView grad, ConstTensorView positions, RopeCall call) const {
  run(*this, grad, grad, positions, call, true);
}
void Rope::backward(ConstTensorView grad_out, TensorView grad_in, ConstTensorView positions, RopeCall call) const {
  run(*this, grad_out, grad_in, positions, call, true);
}

void Rope::forward_qk(TensorView q, TensorView k, ConstTensorView positions, RopeCall call) const {
  check_heads_view(config_, "q", q, q.data);
  check_heads_view(config_, "k", k, k.data);
  if (q.shape[0] != k.shape[0] || q.shape[1] != k.shape[1])
    fail(kOp, "q has shape ", q.shape_string(), " and k has shape ", k.shape_string(),
         ": batch and sequence dimensions must match");
  const Prepared p = prepare(*this, positions, q.shape[0], q.shape[1], call);
  const cpu::HeadRows rows[2] = {head_rows(q, q.ptr<float>(), q, q.ptr<float>()),
                                 head_rows(k, k.ptr<float>(), k, k.ptr<float>())};
  cpu::rope_rotate(angle_table(config_, p, false), {q.shape[0], q.shape[1]},
                   config_.layout == RopeLayout::half ? cpu::PairLayout::half : cpu::PairLayout::interleaved, rows, 2);
}

void Rope::cos_sin(ConstTensorView positions, TensorView cos, TensorView sin, RopeCall call) const {
  const int64_t pairs = config_.effective_rotary_dim() / 2;
  const int64_t streams = config_.num_position_streams();
  const int64_t n = positions.rank >= 1 && positions.rank <= kMaxRank ? positions.shape[positions.rank - 1] : 0;
  check_view(kOp, "cos", cos, DType::f32, {n, pairs});
  check_view(kOp, "sin", sin, DType::f32, {n, pairs});
  detail::check_unit_last_stride(kOp, "cos", cos);
  detail::check_unit_last_stride(kOp, "sin", sin);
  if (positions.rank != (streams > 1 ? 2 : 1))
    fail(kOp, "positions has shape ", positions.shape_string(), ", expected (N)", streams > 1 ? " with streams first: (S, N)" : "");
  if (cos.strides[0] != sin.strides[0]) fail(kOp, "cos and sin must have the same row stride");
  const Prepared p = prepare(*this, positions, 1, n, call);
  cpu::SinCosOut out;
  out.sin_out = sin.ptr<float>();
  out.cos_out = cos.ptr<float>();
  out.stride_t = cos.strides[0];
  cpu::sincos_rows(angle_table(config_, p, false), {1, n}, out);
}

}  // namespace posenc
