// src/attention_cuda.cc: the front end of attention_forward on CUDA views. Everything is checked on the host
// from the views' shapes and the config before anything is queued (device data is never read back: no
// synchronization); then default positions, RoPE's rotated copies and the bias lookup are made in
// stream-ordered device memory and the kernel (src/cuda/attention.cu) runs on posenc::cuda_stream().
// What the device cannot check without reading data back becomes NaN in the output, never a wrong number:
// positions beyond 2^53 (the rows that meet them) and invalid cu_seqlens (the whole output).
#include "src/attention_cuda.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "src/attention_plan.h"
#include "src/check.h"
#include "src/rope_plan.h"

#if POSENC_WITH_CUDA_ATTENTION
#include "src/cuda/attention.h"
#include "src/cuda/device.h"
#endif

namespace posenc::detail {
namespace {
constexpr const char* kOp = "attention";
}

#if POSENC_WITH_CUDA_ATTENTION
namespace {

std::string strides_text(const ViewShape& v) {
  std::string s = "[";
  for (int i = 0; i < v.rank; ++i) s += (i ? ", " : "") + std::to_string(v.strides[i]);
  return s + "]";
}

// A view of device memory with the given shape and strides.
template <class View, class Pointer>
View device_view(Pointer data, DType dtype, std::initializer_list<int64_t> shape,
                 std::initializer_list<int64_t> strides) {
  View v;
  v.data = data;
  v.dtype = dtype;
  v.device = Device::cuda;
  v.shape = dims_from(shape, &v.rank);
  int rank = 0;
  v.strides = dims_from(strides, &rank);
  return v;
}

// Tensor-core tiles read rows of 16 bytes: the data and every row stride aligned to them.
void check_aligned(const char* name, const ViewShape& v, const void* data) {
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0)
    fail(kOp, name, " is not 16-byte aligned on cuda (the tiles are read in 16-byte rows)");
  for (int i = 0; i + 1 < v.rank; ++i)
    if (v.strides[i] % 8 != 0)
      fail(kOp, name, " has strides ", strides_text(v), ": on cuda every stride but the last must be a ",
           "multiple of 8 elements (16-byte rows)");
}

// A checked activation (B, T, H, D) on cuda, of dtype `dtype` (its memory is checked with the others, last).
void check_activation(const char* name, const ViewShape& v, const void* data, DType dtype,
                      std::initializer_list<int64_t> shape) {
  check_view(kOp, name, v, dtype, shape, data, Device::cuda);
  check_unit_last_stride(kOp, name, v);
  check_aligned(name, v, data);
}

// The views' memory, checked after every shape and option (the checks that ask the CUDA runtime).
struct DeviceViews {
  struct Entry {
    const char* name;
    const ViewShape* view;
    const void* data;
  };
  std::vector<Entry> entries;
  void add(const char* name, const ViewShape& v, const void* data) { entries.push_back({name, &v, data}); }
  void check() const {
    for (const Entry& e : entries) cuda::check_device_memory(kOp, e.name, *e.view, e.data);
  }
};

void copy_strides(const ViewShape& v, int64_t* out) {
  for (int i = 0; i < 3; ++i) out[i] = v.strides[i];
}

// Positions (T) or (B, T) int64 in device memory: (pointer, per-batch stride).
std::pair<const int64_t*, int64_t> device_positions(const char* name, const ConstTensorView& p, int64_t B,
                                                    int64_t T) {
  const PositionLayout l = check_positions(kOp, p, 1, B, T, Device::cuda);
  if (l.token_stride != 1)
    fail(kOp, name, " has strides ", strides_text(p), ": on cuda the token stride must be 1");
  return {l.data, l.batch_stride};
}

void check_temperature(const QueryTemperature& t) {
  if (t.kind == QueryTemperature::Kind::none) return;
  if (!std::isfinite(t.scale) || std::abs(t.scale) > 1e6)
    fail_arg(kOp, "query_temperature.scale", t.scale, "must be finite, |scale| <= 1e6");
  if (!std::isfinite(t.floor_scale) || !(t.floor_scale >= 1))
    fail_arg(kOp, "query_temperature.floor_scale", t.floor_scale, "must be finite and >= 1");
  if (t.kind == QueryTemperature::Kind::qwen_logn && !(t.floor_scale > 1))
    fail_arg(kOp, "query_temperature.floor_scale", t.floor_scale,
             "must be > 1 for qwen_logn (log(seq_length))");
}

void set_bias(const AttentionBias& ab, int64_t H, cuda::AttentionLaunch& l, DeviceViews& memory) {
  if (ab.kind == AttentionBias::Kind::none) return;
  l.has_bias = true;
  if (H > cuda::kMaxAttentionHeads)
    fail(kOp, "q has ", H, " heads: a bias on cuda takes at most ", cuda::kMaxAttentionHeads);
  if (ab.kind == AttentionBias::Kind::alibi) {
    if (ab.alibi.heads != H)
      fail(kOp, "bias.alibi.heads = ", ab.alibi.heads, " differs from the ", H, " heads of q");
    l.bias.kind = cuda::BiasKind::alibi;
    l.bias.slopes = alibi_slopes(ab.alibi);
    l.bias.symmetric = ab.alibi.symmetric;
    return;
  }
  validate(ab.relative);
  if (ab.relative.heads != H)
    fail(kOp, "bias.relative.heads = ", ab.relative.heads, " differs from the ", H, " heads of q");
  check_view(kOp, "bias.relative_table", ab.relative_table, DType::f32, {ab.relative.num_rows(), H},
             ab.relative_table.data, Device::cuda);
  memory.add("bias.relative_table", ab.relative_table, ab.relative_table.data);
  l.bias = cuda::learned_bias_rows(kOp, ab.relative);
  if (2 * l.bias.limit + 1 > cuda::kMaxDeviceRowTable)
    fail_arg(kOp, "bias.relative.max_distance", ab.relative.max_distance,
             "must be at most " + std::to_string((cuda::kMaxDeviceRowTable - 1) / 2) +
                 " on cuda (the per-head lookup is staged in shared memory)");
  l.bias.table = ab.relative_table.ptr<float>();
  l.bias.table_strides[0] = ab.relative_table.strides[0],
  l.bias.table_strides[1] = ab.relative_table.strides[1];
}

// Shaw's tables for the forward (as the CPU's attention plan checks them), within the GPU's limits.
void set_shaw(const AttentionShaw& s, int64_t D, int64_t Dv, cuda::AttentionLaunch& l, DeviceViews& memory) {
  validate(s.config);
  if (s.config.head_dim != D)
    fail(kOp, "shaw.config.head_dim = ", s.config.head_dim, " differs from the head_dim of q, ", D);
  if (D > cuda::kMaxShawHeadDim)
    fail(kOp, "q has head_dim ", D, ": shaw on cuda takes heads up to ", cuda::kMaxShawHeadDim);
  if (s.config.max_distance > cuda::kMaxShawDistance)
    fail_arg(kOp, "shaw.config.max_distance", s.config.max_distance,
             "must be at most " + std::to_string(cuda::kMaxShawDistance) +
                 " on cuda (the rows' products with a_k are staged in shared memory)");
  const int64_t rows = s.config.num_rows();
  check_view(kOp, "shaw.a_k", s.a_k, DType::f32, {rows, D}, s.a_k.data, Device::cuda);
  memory.add("shaw.a_k", s.a_k, s.a_k.data);
  const int64_t needed = cuda::attention_forward_shared_bytes(D, Dv, rows, s.a_v.data != nullptr),
                available = cuda::max_shared_bytes_per_block();
  if (needed > available)
    fail_arg(kOp, "shaw.config.max_distance", s.config.max_distance,
             "needs " + std::to_string(needed) + " bytes of shared memory per block with head_dim " +
                 std::to_string(D) + ", more than this device's " + std::to_string(available));
  l.shaw_max_distance = s.config.max_distance;
  l.shaw_a_k = s.a_k.ptr<float>();
  l.shaw_a_k_strides[0] = s.a_k.strides[0], l.shaw_a_k_strides[1] = s.a_k.strides[1];
  if (s.a_v.data != nullptr) {
    if (Dv != D) fail(kOp, "shaw.a_v needs value heads of the q/k head_dim ", D, ", v has ", Dv);
    check_view(kOp, "shaw.a_v", s.a_v, DType::f32, {rows, D}, s.a_v.data, Device::cuda);
    memory.add("shaw.a_v", s.a_v, s.a_v.data);
    l.shaw_a_v = s.a_v.ptr<float>();
    l.shaw_a_v_strides[0] = s.a_v.strides[0], l.shaw_a_v_strides[1] = s.a_v.strides[1];
  }
}

// Shaw's backward, beside the forward's limits (set_shaw, which refuses the rest by name): value heads up
// to kMaxShawHeadDim too, and its queries pass's shared memory.
void check_shaw_backward(const AttentionShaw& s, int64_t D, int64_t Dv) {
  if (Dv > cuda::kMaxShawHeadDim)
    fail(kOp, "v has head_dim ", Dv, ": shaw's backward on cuda takes value heads up to ",
         cuda::kMaxShawHeadDim);
  if (D > cuda::kMaxShawHeadDim || s.config.max_distance > cuda::kMaxShawDistance) return;
  const int64_t needed = cuda::attention_backward_shaw_shared_bytes(D, Dv, s.config.num_rows()),
                available = cuda::max_shared_bytes_per_block();
  if (needed > available)
    fail_arg(kOp, "shaw.config.max_distance", s.config.max_distance,
             "needs " + std::to_string(needed) + " bytes of shared memory per block in the backward with " +
                 "head_dim " + std::to_string(D) + ", more than this device's " + std::to_string(available));
}

// Transformer-XL's backward, beside the forward's limits (set_transformer_xl, which refuses the rest by
// name): value heads up to kMaxTransformerXLHeadDim too, and its passes' shared memory.
void check_transformer_xl_backward(int64_t D, int64_t Dv) {
  if (Dv > cuda::kMaxTransformerXLHeadDim)
    fail(kOp, "v has head_dim ", Dv, ": transformer_xl's backward on cuda takes value heads up to ",
         cuda::kMaxTransformerXLHeadDim);
  if (D > cuda::kMaxTransformerXLHeadDim) return;  // set_transformer_xl names it
  const int64_t needed = cuda::attention_backward_xl_shared_bytes(D, Dv),
                available = cuda::max_shared_bytes_per_block();
  if (needed > available)
    fail(kOp, "transformer_xl's backward with head_dim ", D, " needs ", needed,
         " bytes of shared memory per block, more than this device's ", available);
}

// Transformer-XL's parameters for the forward (as the CPU's attention plan checks them), within the GPU's
// limits: heads up to kMaxTransformerXLHeadDim, no query temperature (as on the CPU), default positions (the
// deltas the tiles read are then known from the shapes, without reading positions back).
void set_transformer_xl(const AttentionConfig& config, const AttentionInputs& in, int64_t H, int64_t D,
                        int64_t Dv, cuda::AttentionLaunch& l, DeviceViews& memory) {
  const AttentionTransformerXL& x = *config.transformer_xl;
  validate(x.config);
  if (x.config.heads != H)
    fail(kOp, "transformer_xl.config.heads = ", x.config.heads, " differs from the ", H, " heads of q");
  if (x.config.head_dim != D)
    fail(kOp, "transformer_xl.config.head_dim = ", x.config.head_dim, " differs from the head_dim of q, ", D);
  if (D > cuda::kMaxTransformerXLHeadDim)
    fail(kOp, "q has head_dim ", D, ": transformer_xl on cuda takes heads up to ",
         cuda::kMaxTransformerXLHeadDim);
  if (config.query_temperature.kind != QueryTemperature::Kind::none)
    fail(kOp, "query_temperature and transformer_xl do not combine");
  for (const auto& [name, positions] :
       {std::pair<const char*, const ConstTensorView*>{"q_positions", &in.q_positions},
        {"k_positions", &in.k_positions}})
    if (positions->data != nullptr)
      fail(kOp, name, " is given: transformer_xl on cuda takes the default positions (keys 0 .. K-1, ",
           "queries K-Q .. K-1, per sequence when packed)");
  check_view(kOp, "transformer_xl.u", x.u, DType::f32, {H, D}, x.u.data, Device::cuda);
  check_view(kOp, "transformer_xl.v", x.v, DType::f32, {H, D}, x.v.data, Device::cuda);
  check_view(kOp, "transformer_xl.w_r", x.w_r, DType::f32, {H * D, x.config.d_model}, x.w_r.data,
             Device::cuda);
  memory.add("transformer_xl.u", x.u, x.u.data), memory.add("transformer_xl.v", x.v, x.v.data);
  memory.add("transformer_xl.w_r", x.w_r, x.w_r.data);
  const int64_t needed = cuda::attention_forward_shared_bytes(D, Dv, 0, false, true),
                available = cuda::max_shared_bytes_per_block();
  if (needed > available)
    fail(kOp, "transformer_xl with head_dim ", D, " needs ", needed,
         " bytes of shared memory per block, more than this device's ", available);
  l.xl_u = x.u.ptr<float>(), l.xl_v = x.v.ptr<float>(), l.xl_w_r = x.w_r.ptr<float>();
  for (int i = 0; i < 2; ++i)
    l.xl_u_strides[i] = x.u.strides[i], l.xl_v_strides[i] = x.v.strides[i],
    l.xl_w_r_strides[i] = x.w_r.strides[i];
  l.xl_d_model = x.config.d_model, l.xl_base = x.config.base;
}

// The backward's own views: grad_out, and the gradients to add into.
struct BackwardArgs {
  ConstTensorView grad_out;
  const AttentionGrads* grads;
  ConstTensorView sinks;                         // the config's
  const AttentionBias* bias;                     // the config's
  const AttentionShaw* shaw;                     // the config's, or null
  const AttentionTransformerXL* transformer_xl;  // the config's, or null
};

void check_backward(const BackwardArgs& bw, DType dtype, int64_t B, int64_t Q, int64_t K, int64_t H,
                    int64_t Hkv, int64_t D, int64_t Dv, DeviceViews& memory) {
  check_activation("grad_out", bw.grad_out, bw.grad_out.data, dtype, {B, Q, H, Dv});
  memory.add("grad_out", bw.grad_out, bw.grad_out.data);
  const AttentionGrads& g = *bw.grads;
  const std::pair<const char*, const TensorView*> xl_params[] = {
      {"grads.transformer_xl_u", &g.transformer_xl_u},
      {"grads.transformer_xl_v", &g.transformer_xl_v},
      {"grads.transformer_xl_w_r", &g.transformer_xl_w_r}};
  for (const auto& [name, view] : xl_params) {
    if (view->data == nullptr) continue;
    if (bw.transformer_xl == nullptr) fail(kOp, name, " is given but attention has no such encoding");
    const TransformerXLConfig& xc = bw.transformer_xl->config;
    validate(xc);  // its fields named before they are used as a shape, as set_transformer_xl names them
    if (xc.heads != H)
      fail(kOp, "transformer_xl.config.heads = ", xc.heads, " differs from the ", H, " heads of q");
    if (xc.head_dim != D)
      fail(kOp, "transformer_xl.config.head_dim = ", xc.head_dim, " differs from the head_dim of q, ", D);
    const bool w_r = view == &g.transformer_xl_w_r;
    check_view(kOp, name, *view, DType::f32, {w_r ? H * D : H, w_r ? xc.d_model : D}, view->data,
               Device::cuda);
    memory.add(name, *view, view->data);
  }
  for (const auto& [name, view] : {std::pair<const char*, const TensorView*>{"grads.shaw_a_k", &g.shaw_a_k},
                                   {"grads.shaw_a_v", &g.shaw_a_v}}) {
    if (view->data == nullptr) continue;
    if (bw.shaw == nullptr || (view == &g.shaw_a_v && bw.shaw->a_v.data == nullptr))
      fail(kOp, name, " is given but attention has no such encoding");
    validate(bw.shaw->config);  // its fields named before the rows they give are used as a shape
    check_view(kOp, name, *view, DType::f32, {bw.shaw->config.num_rows(), D}, view->data, Device::cuda);
    memory.add(name, *view, view->data);
  }
  if (g.relative_table.data != nullptr) {
    if (bw.bias->kind != AttentionBias::Kind::relative)
      fail(kOp, "grads.relative_table is given but attention has no relative bias");
    check_view(kOp, "grads.relative_table", g.relative_table, DType::f32, {bw.bias->relative.num_rows(), H},
               g.relative_table.data, Device::cuda);
    memory.add("grads.relative_table", g.relative_table, g.relative_table.data);
  }
  if (g.sinks.data != nullptr) {
    if (bw.sinks.data == nullptr) fail(kOp, "grads.sinks is given but attention has no sinks");
    check_view(kOp, "grads.sinks", g.sinks, DType::f32, {H}, g.sinks.data, Device::cuda);
    memory.add("grads.sinks", g.sinks, g.sinks.data);
  }
  const std::pair<const char*, const TensorView*> qkv_grads[] = {
      {"grads.q", &g.q}, {"grads.k", &g.k}, {"grads.v", &g.v}};
  for (const auto& [name, view] : qkv_grads) {
    const bool is_q = view == &g.q, is_v = view == &g.v;
    check_view(kOp, name, *view, activation_dtype(*view), {B, is_q ? Q : K, is_q ? H : Hkv, is_v ? Dv : D},
               view->data, Device::cuda);
    check_unit_last_stride(kOp, name, *view);
    memory.add(name, *view, view->data);
  }
}

// attention_forward (bw null) or attention_backward on CUDA views: every check, then the launches.
void run(const AttentionConfig& config, const AttentionInputs& in, const ViewShape& out, const void* out_data,
         const ViewShape& lse, const void* lse_data, const BackwardArgs* bw) {
  // Shapes and dtypes.
  const DType dtype = in.q.dtype;
  if (dtype != DType::bf16 && dtype != DType::f16)
    fail(kOp, "q has dtype ", dtype_name(dtype), ": attention on cuda takes bf16 or f16 q, k, v and out ",
         "(tensor cores, fp32 accumulation)");
  // Each head dim is checked before the strides it sets (a row of 4 elements is refused for its size).
  const auto check_head_dim = [](const char* name, const ViewShape& v, int64_t dim) {
    if (dim < 8 || dim > cuda::kMaxAttentionHeadDim || dim % 8 != 0)
      fail(kOp, name, " has shape ", v.shape_string(),
           ": on cuda its head dim must be a multiple of 8 from 8 to ", cuda::kMaxAttentionHeadDim,
           " (16-byte rows of the tensor-core tiles)");
  };
  check_view(kOp, "q", in.q, dtype, {-1, -1, -1, -1}, in.q.data, Device::cuda);
  const int64_t B = in.q.shape[0], Q = in.q.shape[1], H = in.q.shape[2], D = in.q.shape[3];
  check_head_dim("q", in.q, D);
  check_activation("q", in.q, in.q.data, dtype, {-1, -1, -1, -1});
  check_activation("k", in.k, in.k.data, dtype, {B, -1, -1, D});
  const int64_t K = in.k.shape[1], Hkv = in.k.shape[2];
  check_view(kOp, "v", in.v, dtype, {B, K, Hkv, -1}, in.v.data, Device::cuda);
  const int64_t Dv = in.v.shape[3];
  check_head_dim("v", in.v, Dv);
  check_activation("v", in.v, in.v.data, dtype, {B, K, Hkv, -1});
  if (Hkv == 0 || H % Hkv != 0)
    fail(kOp, "q has ", H, " heads and k has ", Hkv,
         ": the query heads must be a multiple of the key/value heads");
  check_activation("out", out, out_data, dtype, {B, Q, H, Dv});
  DeviceViews memory;
  memory.add("q", in.q, in.q.data), memory.add("k", in.k, in.k.data), memory.add("v", in.v, in.v.data);
  memory.add("out", out, out_data);
  if (lse_data != nullptr) {
    check_view(kOp, "lse", lse, DType::f32, {B, H, Q}, lse_data, Device::cuda);
    memory.add("lse", lse, lse_data);
  } else if (bw != nullptr) {
    fail(kOp, "lse is required by the backward (the forward's lse)");
  }
  if (bw != nullptr) check_backward(*bw, dtype, B, Q, K, H, Hkv, D, Dv, memory);
  if (bw != nullptr && config.transformer_xl) check_transformer_xl_backward(D, Dv);
  if (H > 65535 || B > 65535)
    fail(kOp, "q has shape ", in.q.shape_string(), ": on cuda B and H must be <= 65535");

  // The config: what the kernel has, and what it refuses by name.
  if (config.rotate_values) fail(kOp, "rotate_values is not available on cuda (fp32 values only)");
  if (config.window < 0) fail_arg(kOp, "window", config.window, "must be >= 0 (0 = no window)");
  if (config.chunk < 0) fail_arg(kOp, "chunk", config.chunk, "must be >= 0 (0 = no chunks)");
  if (!std::isfinite(config.softcap) || config.softcap < 0)
    fail_arg(kOp, "softcap", config.softcap, "must be finite and >= 0 (0 = none)");
  const float scale = attention_scale(config, D);
  check_temperature(config.query_temperature);

  cuda::AttentionLaunch l;
  l.dtype = dtype;
  l.B = B, l.Q = Q, l.K = K, l.H = H, l.Hkv = Hkv, l.D = D, l.Dv = Dv;
  l.q = in.q.data, l.k = in.k.data, l.v = in.v.data, l.out = const_cast<void*>(out_data);
  copy_strides(in.q, l.q_strides), copy_strides(in.k, l.k_strides), copy_strides(in.v, l.v_strides);
  copy_strides(out, l.out_strides);
  if (lse_data != nullptr)
    l.lse = static_cast<float*>(const_cast<void*>(lse_data)), copy_strides(lse, l.lse_strides);
  l.scale = scale;
  l.mask = {config.causal, config.window, config.chunk};
  l.softcap = static_cast<float>(config.softcap);
  l.temperature = config.query_temperature;
  if (config.sinks.data != nullptr) {
    check_view(kOp, "sinks", config.sinks, DType::f32, {H}, config.sinks.data, Device::cuda);
    memory.add("sinks", config.sinks, config.sinks.data);
    l.sinks = config.sinks.ptr<float>(), l.sinks_stride = config.sinks.strides[0];
  }
  set_bias(config.bias, H, l, memory);
  if (config.shaw && config.transformer_xl)
    fail(kOp, "shaw and transformer_xl are alternatives: give one of them");
  if (config.shaw && bw != nullptr) check_shaw_backward(*config.shaw, D, Dv);
  if (config.shaw) set_shaw(*config.shaw, D, Dv, l, memory);
  if (config.transformer_xl) set_transformer_xl(config, in, H, D, Dv, l, memory);

  // Packed sequences: their offsets stay on the device (checked there: invalid ones make out NaN).
  const bool packed = in.cu_seqlens_q.data != nullptr || in.cu_seqlens_k.data != nullptr;
  if (packed) {
    if (in.cu_seqlens_q.data == nullptr || in.cu_seqlens_k.data == nullptr)
      fail(kOp, "packed sequences need both cu_seqlens_q and cu_seqlens_k");
    if (B != 1) fail(kOp, "q has shape ", in.q.shape_string(), ": packed sequences need batch 1");
    check_view(kOp, "cu_seqlens_q", in.cu_seqlens_q, DType::i64, {-1}, in.cu_seqlens_q.data, Device::cuda);
    check_view(kOp, "cu_seqlens_k", in.cu_seqlens_k, DType::i64, {in.cu_seqlens_q.shape[0]},
               in.cu_seqlens_k.data, Device::cuda);
    if (in.cu_seqlens_q.shape[0] < 2 || in.cu_seqlens_q.shape[0] > 65536)
      fail(kOp, "cu_seqlens_q has shape ", in.cu_seqlens_q.shape_string(),
           ", expected (N + 1) with 1 <= N <= 65535");
    for (const auto& [name, v] :
         {std::pair<const char*, const ConstTensorView*>{"cu_seqlens_q", &in.cu_seqlens_q},
          {"cu_seqlens_k", &in.cu_seqlens_k}}) {
      if (v->strides[0] != 1)
        fail(kOp, name, " has strides ", strides_text(*v), ": must be contiguous on cuda");
      memory.add(name, *v, v->data);
    }
    l.cu_seqlens_q = in.cu_seqlens_q.ptr<int64_t>(), l.cu_seqlens_k = in.cu_seqlens_k.ptr<int64_t>();
    l.sequences = in.cu_seqlens_q.shape[0] - 1;
  }

  // Positions: given, or default ones made on the device.
  const bool given_q = in.q_positions.data != nullptr, given_k = in.k_positions.data != nullptr;
  if (given_q) {
    std::tie(l.q_pos, l.q_pos_stride) = device_positions("q_positions", in.q_positions, B, Q);
    memory.add("q_positions", in.q_positions, in.q_positions.data);
  }
  if (given_k) {
    std::tie(l.k_pos, l.k_pos_stride) = device_positions("k_positions", in.k_positions, B, K);
    memory.add("k_positions", in.k_positions, in.k_positions.data);
  }

  // RoPE: its config checked here, applied below on copies.
  const Rope* rope = config.rope;
  int64_t rope_dim = 0;
  if (rope != nullptr) {
    const RopeConfig& rc = rope->config();
    if (rc.num_position_streams() != 1)
      fail(kOp, "rope is multimodal (", rope_multimodal_name(rc.multimodal),
           "): apply it with Rope::forward_qk before attention, whose positions are one stream");
    rope_dim = rc.head_dim;
    if (config.rope_offset < 0 || config.rope_offset > D - rope_dim)
      fail(kOp, "rope_offset = ", config.rope_offset, " and rope.head_dim = ", rope_dim,
           " do not fit the head_dim of q, ", D, ": need 0 <= rope_offset <= ", D, " - ", rope_dim);
  }

  memory.check();

  // Nothing is queued before this line. Device memory for what the kernel reads besides the inputs.
  const int64_t default_q = given_q ? 0 : B * Q, default_k = given_k ? 0 : B * K;
  cuda::DeviceScratch positions(kOp, "default positions", static_cast<size_t>(default_q + default_k) * 8);
  if (!given_q || !given_k) {
    cuda::DefaultPositionsLaunch d;
    d.B = B, d.Q = Q, d.K = K;
    d.cu_seqlens_q = l.cu_seqlens_q, d.cu_seqlens_k = l.cu_seqlens_k, d.sequences = l.sequences;
    d.q_pos = given_q ? nullptr : positions.as<int64_t>();
    d.k_pos = given_k ? nullptr : positions.as<int64_t>() + default_q;
    cuda::attention_default_positions(d);
    if (!given_q) l.q_pos = d.q_pos, l.q_pos_stride = Q;
    if (!given_k) l.k_pos = d.k_pos, l.k_pos_stride = K;
  }
  l.default_positions = !given_q && !given_k;
  const size_t q_bytes = static_cast<size_t>(B * Q * H * D) * 2,
               k_bytes = static_cast<size_t>(B * K * Hkv * D) * 2;
  // RoPE's range of the heads: dims [rope_offset, rope_offset + rope.head_dim) of the contiguous rows at
  // base.
  const auto range = [&](void* base, DType type, int64_t T, int64_t heads) {
    const int64_t element_bytes = type == DType::f32 ? 4 : 2;
    return device_view<TensorView>(
        static_cast<void*>(static_cast<char*>(base) + config.rope_offset * element_bytes), type,
        {B, T, heads, rope_dim}, {T * heads * D, heads * D, D, 1});
  };
  const auto pos_view = [&](const int64_t* p, int64_t stride, int64_t T) {
    return stride == 0
               ? device_view<ConstTensorView>(static_cast<const void*>(p), DType::i64, {T}, {1})
               : device_view<ConstTensorView>(static_cast<const void*>(p), DType::i64, {B, T}, {stride, 1});
  };
  std::unique_ptr<cuda::DeviceScratch> k_rotated, q_rotated, q_cos_sin;
  if (rope != nullptr) {
    // Contiguous copies of k and q, their dims [rope_offset, rope_offset + rope.head_dim) rotated. Where the
    // range is the whole head, the rotation writes the copy (one pass); else the rows are copied and the
    // range rotated in place.
    const auto rotated_copy = [&](const ConstTensorView& x, size_t bytes, const int64_t* pos, int64_t stride,
                                  int64_t T, int64_t heads, const char* what) {
      auto copy = std::make_unique<cuda::DeviceScratch>(kOp, what, bytes);
      if (rope_dim == D) {
        rope->forward(x, range(copy->data(), dtype, T, heads), pos_view(pos, stride, T));
      } else {
        cuda::copy_head_rows(x.data, x.strides.data(), B, T, heads, D, copy->as<char>());
        rope->forward(range(copy->data(), dtype, T, heads), pos_view(pos, stride, T));
      }
      return copy;
    };
    k_rotated = rotated_copy(in.k, k_bytes, l.k_pos, l.k_pos_stride, K, Hkv, "rotated k");
    l.k = k_rotated->data();
    const int64_t ks[3] = {K * Hkv * D, Hkv * D, D};
    for (int i = 0; i < 3; ++i) l.k_strides[i] = ks[i];
    // The forward's sm_90a kernel rotates q itself as it stages each row block (one pass over q less), from
    // a table of every query token's cos and sin (Rope::cos_sin: the rotation's own values); elsewhere q is
    // a rotated copy too.
    const int64_t pairs = rope->config().effective_rotary_dim() / 2;
    const bool flat_positions = l.q_pos_stride == 0 || l.q_pos_stride == Q;
    if (bw == nullptr && flat_positions && cuda::attention_forward_rotates_q(l)) {
      const int64_t n = l.q_pos_stride == 0 ? Q : B * Q;
      q_cos_sin = std::make_unique<cuda::DeviceScratch>(kOp, "q's cos and sin",
                                                        static_cast<size_t>(2 * n * pairs) * 4);
      float* cos = q_cos_sin->as<float>();
      float* sin = cos + n * pairs;
      rope->cos_sin(device_view<ConstTensorView>(static_cast<const void*>(l.q_pos), DType::i64, {n}, {1}),
                    device_view<TensorView>(static_cast<void*>(cos), DType::f32, {n, pairs}, {pairs, 1}),
                    device_view<TensorView>(static_cast<void*>(sin), DType::f32, {n, pairs}, {pairs, 1}));
      l.q_rotation = {cos,
                      sin,
                      l.q_pos_stride == 0 ? 0 : Q,
                      static_cast<int>(pairs),
                      static_cast<int>(config.rope_offset),
                      rope->config().layout == RopeLayout::interleaved};
    } else {
      q_rotated = rotated_copy(in.q, q_bytes, l.q_pos, l.q_pos_stride, Q, H, "rotated q");
      l.q = q_rotated->data();
      const int64_t qs[3] = {Q * H * D, H * D, D};
      for (int i = 0; i < 3; ++i) l.q_strides[i] = qs[i];
    }
  }
  if (bw == nullptr) {
    cuda::attention_forward(l);
    return;
  }

  // The backward: fp32 scratch for the gradients the kernels do not store into the views themselves, RoPE's
  // inverse rotation of dq and dk, and one add (or write) into each view.
  const AttentionGrads& g = *bw->grads;
  const bool add = g.accumulate;
  // The keys blocks write every row of dk and dv of each batch row's keys (not so outside packed sequences,
  // nor without queries): there they store dv, and dk where no RoPE rotates it back after, straight into
  // the caller's views, each element rounded once (no scratch, no pass after).
  const bool every_key_row_written = l.cu_seqlens_q == nullptr && Q > 0 && H > 0;
  const bool direct_k = every_key_row_written && rope == nullptr, direct_v = every_key_row_written;
  const size_t nq = static_cast<size_t>(B * Q * H * D),
               nk = direct_k ? 0 : static_cast<size_t>(B * K * Hkv * D),
               nv = direct_v ? 0 : static_cast<size_t>(B * K * Hkv * Dv);
  cuda::DeviceScratch grads(kOp, "the fp32 gradients of q, k and v", (nq + nk + nv) * 4);
  // dq is added into by the blocks: zeroed; so are dk and dv where rows belong to no block.
  grads.zero(every_key_row_written ? nq * 4 : (nq + nk + nv) * 4);
  cuda::AttentionBackwardLaunch bl;
  bl.forward = l;
  bl.out = out_data, bl.grad_out = bw->grad_out.data, bl.lse = static_cast<const float*>(lse_data);
  copy_strides(out, bl.out_strides), copy_strides(bw->grad_out, bl.grad_out_strides);
  copy_strides(lse, bl.lse_strides);
  bl.dq = grads.as<float>();
  bl.dk = direct_k ? nullptr : bl.dq + nq, bl.dv = direct_v ? nullptr : bl.dq + nq + nk;
  const auto key_gradient_out = [&](const TensorView& view) {
    return cuda::KeyGradientOut{
        view.data, {view.strides[0], view.strides[1], view.strides[2]}, view.dtype, add};
  };
  if (direct_k) bl.dk_out = key_gradient_out(g.k);
  if (direct_v) bl.dv_out = key_gradient_out(g.v);
  if (bw->grads->relative_table.data != nullptr) {
    const TensorView& t = bw->grads->relative_table;
    bl.grad_table = t.ptr<float>(), bl.grad_table_strides[0] = t.strides[0],
    bl.grad_table_strides[1] = t.strides[1];
    bl.table_rows = t.shape[0];
  }
  for (auto [view, grad, strides] :
       {std::tuple{&bw->grads->shaw_a_k, &bl.grad_shaw_a_k, bl.grad_shaw_a_k_strides},
        std::tuple{&bw->grads->shaw_a_v, &bl.grad_shaw_a_v, bl.grad_shaw_a_v_strides},
        std::tuple{&bw->grads->transformer_xl_u, &bl.grad_xl_u, bl.grad_xl_u_strides},
        std::tuple{&bw->grads->transformer_xl_v, &bl.grad_xl_v, bl.grad_xl_v_strides},
        std::tuple{&bw->grads->transformer_xl_w_r, &bl.grad_xl_w_r, bl.grad_xl_w_r_strides}})
    if (view->data != nullptr)
      *grad = view->ptr<float>(), strides[0] = view->strides[0], strides[1] = view->strides[1];
  if (bw->grads->sinks.data != nullptr)
    bl.grad_sinks = bw->grads->sinks.ptr<float>(), bl.grad_sinks_stride = bw->grads->sinks.strides[0];
  if (!add)  // the parameters' gradients are added into by the kernels: zeroed first when they are written
    for (const TensorView* t : {&g.relative_table, &g.shaw_a_k, &g.shaw_a_v, &g.transformer_xl_u,
                                &g.transformer_xl_v, &g.transformer_xl_w_r, &g.sinks})
      if (t->data != nullptr)
        cuda::zero_gradient(t->ptr<float>(), t->shape[0], t->rank > 1 ? t->shape[1] : 1, t->strides[0],
                            t->rank > 1 ? t->strides[1] : 1);
  cuda::attention_backward(bl);
  if (rope != nullptr && rope_dim == D) {
    // Back through RoPE and into the gradients in one pass: dq (+)= R^T dq', dk (+)= R^T dk'.
    detail::rope_backward_into_gradient_cuda(*rope, range(bl.dq, DType::f32, Q, H), g.q,
                                             pos_view(l.q_pos, l.q_pos_stride, Q), add);
    detail::rope_backward_into_gradient_cuda(*rope, range(bl.dk, DType::f32, K, Hkv), g.k,
                                             pos_view(l.k_pos, l.k_pos_stride, K), add);
  } else {
    if (rope != nullptr) {  // the range rotated back in place, then every dim added or written
      rope->backward(range(bl.dq, DType::f32, Q, H), pos_view(l.q_pos, l.q_pos_stride, Q));
      rope->backward(range(bl.dk, DType::f32, K, Hkv), pos_view(l.k_pos, l.k_pos_stride, K));
    }
    cuda::accumulate_gradient(bl.dq, g.q.data, g.q.dtype, g.q.strides.data(), B, Q, H, D, add);
    if (!direct_k)
      cuda::accumulate_gradient(bl.dk, g.k.data, g.k.dtype, g.k.strides.data(), B, K, Hkv, D, add);
  }
  if (!direct_v)
    cuda::accumulate_gradient(bl.dv, g.v.data, g.v.dtype, g.v.strides.data(), B, K, Hkv, Dv, add);
}

}  // namespace

void attention_forward_cuda(const AttentionConfig& config, const AttentionInputs& in, TensorView out,
                            TensorView lse) {
  run(config, in, out, out.data, lse, lse.data, nullptr);
}

void attention_backward_cuda(const AttentionConfig& config, const AttentionInputs& in, ConstTensorView out,
                             ConstTensorView lse, ConstTensorView grad_out, const AttentionGrads& grads) {
  const BackwardArgs bw{grad_out,
                        &grads,
                        config.sinks,
                        &config.bias,
                        config.shaw ? &*config.shaw : nullptr,
                        config.transformer_xl ? &*config.transformer_xl : nullptr};
  run(config, in, out, out.data, lse, lse.data, &bw);
}

#else

namespace {
[[noreturn]] void refuse(const AttentionInputs& in) {
  check_device(kOp, "q", in.q, Device::cuda);
#if POSENC_WITH_CUDA
  fail(kOp, "attention on cuda tensors needs the CuTe headers at build time (scripts/fetch_cutlass.sh), ",
       "which this build did not find");
#else
  fail_without_cuda(kOp, "q");
#endif
}
}  // namespace

void attention_forward_cuda(const AttentionConfig&, const AttentionInputs& in, TensorView, TensorView) {
  refuse(in);
}
void attention_backward_cuda(const AttentionConfig&, const AttentionInputs& in, ConstTensorView,
                             ConstTensorView, ConstTensorView, const AttentionGrads&) {
  refuse(in);
}

#endif

}  // namespace posenc::detail
