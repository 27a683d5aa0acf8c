// src/rope.cc: the RoPE front end. Validates views and positions, takes the frequency table of the
// call's length from the Rope (src/rope_scaling.cc computes it) and hands rows to the backend.
#include <algorithm>

#include "posenc/rope.h"
#include "src/check.h"
#include "src/cpu/rope.h"
#include "src/cuda/rope.h"  // no CUDA types: RopeOutput names the call's output in every build
#include "src/rope_plan.h"
#if POSENC_WITH_CUDA
#include "src/cuda/device.h"
#endif

namespace posenc {
using detail::check_view;
using detail::fail;

namespace detail {
AngleTable RopePlan::angles(bool inverse) const {
  AngleTable a;
  a.inv_freq = freq.inv_freq.data();
  a.stream = multi_stream ? freq.stream.data() : nullptr;
  a.pairs = static_cast<int64_t>(freq.inv_freq.size());
  a.positions = positions.data();
  a.scale = freq.attention_factor;
  a.inverse = inverse != reversed;  // R(-p theta) = R(p theta)^T
  return a;
}

RopePlan plan_rope(const Rope& rope, std::vector<int64_t> positions, std::optional<int64_t> seq_len) {
  RopePlan p;
  p.positions = std::move(positions);
  int64_t len = 0;
  if (seq_len) {
    if (*seq_len < 0) fail_arg("rope", "seq_len", *seq_len, "must be >= 0");
    len = *seq_len;
  } else if (!p.positions.empty()) {
    len = *std::max_element(p.positions.begin(), p.positions.end()) + 1;
  }
  p.freq = rope.frequencies(len);
  p.layout = rope.config().layout;
  p.multi_stream = rope.config().num_position_streams() > 1;
  p.reversed = rope.config().reversed;
  return p;
}

void rope_apply(const RopePlan& plan, TokenGrid grid, const HeadRows* tensors, int num_tensors,
                bool inverse) {
  cpu::rope_rotate(plan.angles(inverse), grid, plan.layout, tensors, num_tensors);
}
}  // namespace detail

namespace {
constexpr const char* kOp = "rope";

detail::RopePlan plan_call(const Rope& rope, const ConstTensorView& positions, int64_t batch, int64_t tokens,
                           const RopeCall& call) {
  return detail::plan_rope(
      rope, detail::gather_positions(kOp, positions, rope.config().num_position_streams(), batch, tokens),
      call.seq_len);
}

// f32, bf16 or fp16 rows (B, T, H, head_dim) on `device`.
void check_heads_view(const RopeConfig& cfg, std::string_view name, const ViewShape& v, const void* data,
                      Device device) {
  const DType dtype = detail::activation_dtype(v);
  check_view(kOp, name, v, dtype, {-1, -1, -1, cfg.head_dim}, data, device);
  detail::check_unit_last_stride(kOp, name, v);
}

// One tensor of a call on CUDA views: rows read from `in` and written to `out` (the same view in place).
struct DeviceTensor {
  const char* name;
  ConstTensorView in;
  TensorView out;
};

#if POSENC_WITH_CUDA
// The frequencies of a call on the device. Where they depend on the sequence length (dynamic, longrope,
// qwen_dynamic) the call must say it: the CPU's default, max(position) + 1, would read the positions back.
RopeFrequencies device_frequencies(const Rope& rope, const RopeCall& call) {
  const RopeConfig& cfg = rope.config();
  if (call.seq_len) {
    if (*call.seq_len < 0) detail::fail_arg(kOp, "seq_len", *call.seq_len, "must be >= 0");
    return rope.frequencies(*call.seq_len);
  }
  const RopeScalingType type = cfg.scaling.type;
  if (type == RopeScalingType::dynamic || type == RopeScalingType::longrope ||
      type == RopeScalingType::qwen_dynamic)
    fail(kOp, "rope_type ", rope_scaling_name(type),
         " on cuda tensors needs the sequence length (RopeCall::seq_len;",
         " Python: seq_len=): its frequencies depend on it, and the default, max(position) + 1, would read "
         "the "
         "positions back from the device");
  return rope.frequencies(0);
}

RopeFrequencies checked_device_frequencies(const Rope& rope, const RopeCall& call) {
  RopeFrequencies freq = device_frequencies(rope, call);
  if (static_cast<int64_t>(freq.inv_freq.size()) > cuda::kMaxDevicePairs)
    fail(kOp, "rotary_dim = ", 2 * freq.inv_freq.size(), " is larger than the CUDA backend takes (",
         2 * cuda::kMaxDevicePairs, ")");
  return freq;
}
#endif

// Rotates (B, T, H, D) rows of CUDA views whose shapes and dtypes are checked; queues on cuda_stream().
// output: rotated rows (in and out of one storage type), or the tensors' in rows (f32) rotated and added into
// (or written to) their out rows, of any storage type.
void run_cuda(const Rope& rope, const DeviceTensor* tensors, int num_tensors, int64_t batch, int64_t tokens,
              const ConstTensorView& positions, const RopeCall& call, bool inverse,
              cuda::RopeOutput output = cuda::RopeOutput::rotated) {
#if POSENC_WITH_CUDA
  const RopeConfig& cfg = rope.config();
  const detail::PositionLayout pos =
      detail::check_positions(kOp, positions, cfg.num_position_streams(), batch, tokens, Device::cuda);
  const RopeFrequencies freq = checked_device_frequencies(rope, call);
  cuda::check_device_memory(kOp, "positions", positions, positions.data);
  cuda::RopeLaunch launch;
  for (int i = 0; i < num_tensors; ++i) {
    const DeviceTensor& t = tensors[i];
    cuda::check_device_memory(kOp, t.name, t.in, t.in.data);
    if (t.out.data != t.in.data) cuda::check_device_memory(kOp, "out", t.out, t.out.data);
    launch.tensors[i] = {t.in.data,
                         t.out.data,
                         {t.in.strides[0], t.in.strides[1], t.in.strides[2]},
                         {t.out.strides[0], t.out.strides[1], t.out.strides[2]},
                         t.in.shape[2]};
  }
  launch.freq = &freq;
  launch.multi_stream = cfg.num_position_streams() > 1;
  launch.inverse = inverse != cfg.reversed;  // R(-p theta) = R(p theta)^T
  launch.layout = cfg.layout;
  launch.dtype = tensors[0].in.dtype;
  launch.dim = cfg.head_dim;
  launch.batch = batch;
  launch.tokens = tokens;
  launch.positions = pos;
  launch.num_tensors = num_tensors;
  launch.output = output;
  launch.out_dtype = tensors[0].out.dtype;
  cuda::rope_rotate(launch);
#else
  (void)rope, (void)num_tensors, (void)batch, (void)tokens, (void)positions, (void)call, (void)inverse;
  (void)output;
  detail::fail_without_cuda(kOp, tensors[0].name);
#endif
}

// The rows of a checked view, in its storage type.
detail::HeadRows head_rows(const ConstTensorView& in, const TensorView& out, int64_t dim) {
  detail::HeadRows rows;
  rows.dim = dim;
  rows.dtype = in.dtype;
  if (in.dtype == DType::f32) {
    rows.in = strided<3>(in), rows.out = strided<3>(out);
  } else {
    rows.in16 = strided16<3>(in), rows.out16 = strided16<3>(out);
  }
  return rows;
}

void run(const Rope& rope, ConstTensorView x, TensorView out, ConstTensorView positions, const RopeCall& call,
         bool inverse) {
  const RopeConfig& cfg = rope.config();
  check_heads_view(cfg, "x", x, x.data, x.device);
  check_heads_view(cfg, "out", out, out.data, x.device);
  if (out.shape != x.shape)
    fail(kOp, "out has shape ", out.shape_string(), ", expected the shape of x ", x.shape_string());
  if (out.dtype != x.dtype)
    fail(kOp, "out has dtype ", dtype_name(out.dtype), ", expected the dtype of x, ", dtype_name(x.dtype));
  if (x.device == Device::cuda) {
    const DeviceTensor t{"x", x, out};
    run_cuda(rope, &t, 1, x.shape[0], x.shape[1], positions, call, inverse);
    return;
  }
  const detail::RopePlan plan = plan_call(rope, positions, x.shape[0], x.shape[1], call);
  const detail::HeadRows rows = head_rows(x, out, cfg.head_dim);
  detail::rope_apply(plan, {x.shape[0], x.shape[1]}, &rows, 1, inverse);
}
}  // namespace

namespace detail {
void rope_backward_into_gradient_cuda(const Rope& rope, ConstTensorView grad, TensorView target,
                                      ConstTensorView positions, bool add) {
  const RopeConfig& cfg = rope.config();
  check_view(kOp, "grad", grad, DType::f32, {-1, -1, -1, cfg.head_dim}, grad.data, Device::cuda);
  check_heads_view(cfg, "target", target, target.data, Device::cuda);
  detail::check_unit_last_stride(kOp, "grad", grad);
  if (target.shape != grad.shape)
    fail(kOp, "target has shape ", target.shape_string(), ", expected the shape of grad ",
         grad.shape_string());
  const DeviceTensor t{"grad", grad, target};
  run_cuda(rope, &t, 1, grad.shape[0], grad.shape[1], positions, RopeCall{}, true,
           add ? cuda::RopeOutput::gradient_added : cuda::RopeOutput::gradient_written);
}
}  // namespace detail

Rope::Rope(RopeConfig config) : config_(std::move(config)) {
  short_ = rope_frequencies(config_, 0);
  if (config_.scaling.type == RopeScalingType::longrope)
    long_ = rope_frequencies(config_, config_.original_context() + 1);
}

const RopeFrequencies* Rope::cached_frequencies(int64_t seq_len) const {
  switch (config_.scaling.type) {
    case RopeScalingType::dynamic:  // the NTK base grows with every length past max_position_embeddings
      return seq_len > config_.max_position_embeddings ? nullptr : &short_;
    case RopeScalingType::qwen_dynamic:  // alpha steps up past seq_length
      return seq_len > config_.scaling.original_max_position_embeddings ? nullptr : &short_;
    case RopeScalingType::longrope:
      return seq_len > config_.original_context() ? &long_ : &short_;
    default:
      return &short_;
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
void Rope::backward(ConstTensorView grad_out, TensorView grad_in, ConstTensorView positions,
                    RopeCall call) const {
  run(*this, grad_out, grad_in, positions, call, true);
}

void Rope::forward_qk(TensorView q, TensorView k, ConstTensorView positions, RopeCall call) const {
  check_heads_view(config_, "q", q, q.data, q.device);
  check_heads_view(config_, "k", k, k.data, q.device);
  if (q.shape[0] != k.shape[0] || q.shape[1] != k.shape[1])
    fail(kOp, "q has shape ", q.shape_string(), " and k has shape ", k.shape_string(),
         ": batch and sequence dimensions must match");
  if (q.device == Device::cuda) {
    if (k.dtype != q.dtype)
      fail(kOp, "k has dtype ", dtype_name(k.dtype), ", expected the dtype of q, ", dtype_name(q.dtype),
           " (on cuda, q and k are rotated by one kernel)");
    const DeviceTensor t[2] = {{"q", q, q}, {"k", k, k}};
    run_cuda(*this, t, 2, q.shape[0], q.shape[1], positions, call, false);
    return;
  }
  const detail::RopePlan plan = plan_call(*this, positions, q.shape[0], q.shape[1], call);
  const detail::HeadRows rows[2] = {head_rows(q, q, config_.head_dim), head_rows(k, k, config_.head_dim)};
  detail::rope_apply(plan, {q.shape[0], q.shape[1]}, rows, 2, false);
}

void Rope::cos_sin(ConstTensorView positions, TensorView cos, TensorView sin, RopeCall call) const {
  const int64_t pairs = config_.effective_rotary_dim() / 2;
  const int64_t streams = config_.num_position_streams();
  const int64_t n =
      positions.rank >= 1 && positions.rank <= kMaxRank ? positions.shape[positions.rank - 1] : 0;
  const Device device = positions.device;
  check_view(kOp, "cos", cos, DType::f32, {n, pairs}, cos.data, device);
  check_view(kOp, "sin", sin, DType::f32, {n, pairs}, sin.data, device);
  detail::check_unit_last_stride(kOp, "cos", cos);
  detail::check_unit_last_stride(kOp, "sin", sin);
  if (positions.rank != (streams > 1 ? 2 : 1))
    fail(kOp, "positions has shape ", positions.shape_string(), ", expected (N)",
         streams > 1 ? " with streams first: (S, N)" : "");
  if (device == Device::cuda) {
#if POSENC_WITH_CUDA
    const detail::PositionLayout pos = detail::check_positions(kOp, positions, streams, 1, n, Device::cuda);
    const RopeFrequencies freq = checked_device_frequencies(*this, call);
    cuda::check_device_memory(kOp, "positions", positions, positions.data);
    cuda::check_device_memory(kOp, "cos", cos, cos.data);
    cuda::check_device_memory(kOp, "sin", sin, sin.data);
    cuda::CosSinLaunch launch;
    launch.freq = &freq;
    launch.multi_stream = streams > 1;
    launch.inverse = config_.reversed;
    launch.n = n;
    launch.positions = pos;
    launch.cos = cos.ptr<float>();
    launch.sin = sin.ptr<float>();
    launch.cos_row_stride = cos.strides[0];
    launch.sin_row_stride = sin.strides[0];
    cuda::rope_cos_sin(launch);
    return;
#else
    detail::fail_without_cuda(kOp, "positions");
#endif
  }
  const detail::RopePlan plan = plan_call(*this, positions, 1, n, call);
  cpu::SinCosOut out;
  // Rows (1, N): the batch stride is never used.
  out.sin_out = {sin.ptr<float>(), {1, n}, {0, sin.strides[0]}};
  out.cos_out = {cos.ptr<float>(), {1, n}, {0, cos.strides[0]}};
  cpu::sincos_rows(plan.angles(false), {1, n}, out);
}

}  // namespace posenc
