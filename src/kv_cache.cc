// src/kv_cache.cc: see posenc/kv_cache.h. Storage is head-major, (B, Hkv, capacity, D), grown by
// doubling: a decode step streams each head's keys and values contiguously (token-major storage
// puts every 512-byte row in its own 4 KiB page, which defeats the hardware prefetcher: measured
// 41 -> see BENCHMARKS.md). The attention sees strided views of the first `size` tokens.
#include "posenc/kv_cache.h"

#include <algorithm>
#include <array>
#include "src/attention_plan.h"
#include "src/check.h"
#include "src/cpu/attention.h"
#include "src/cpu/half.h"
#include "src/cpu/kv_cache.h"
#include "src/rope_plan.h"

namespace posenc {
using detail::check_view;
using detail::fail;
namespace {
constexpr const char* kOp = "KVCache";
}

KVCache::KVCache(int64_t batch, int64_t kv_heads, int64_t head_dim, const Rope* rope, DType dtype,
                 Device device)
    : batch_(batch), kv_heads_(kv_heads), head_dim_(head_dim), rope_(rope), dtype_(dtype), device_(device) {
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16)
    fail(kOp, "dtype = ", dtype_name(dtype), " is invalid: the cache stores f32, bf16 or f16");
  if (batch <= 0) detail::fail_arg(kOp, "batch", batch, "must be > 0");
  if (kv_heads <= 0) detail::fail_arg(kOp, "kv_heads", kv_heads, "must be > 0");
  if (head_dim <= 0) detail::fail_arg(kOp, "head_dim", head_dim, "must be > 0");
  if (rope && rope->config().head_dim != head_dim)
    fail(kOp, "rope.head_dim = ", rope->config().head_dim, " differs from head_dim = ", head_dim);
  if (device == Device::cuda) {
    if (!POSENC_WITH_CUDA_ATTENTION)
      fail(kOp, "device = cuda needs posenc's CUDA attention, which this build does not have");
    if (dtype == DType::f32)
      fail(kOp, "dtype = f32 is invalid on cuda: the CUDA attention reads bf16 or f16 keys and values");
    if (head_dim % 8 != 0)
      detail::fail_arg(kOp, "head_dim", head_dim, "must be a multiple of 8 on cuda (16-byte rows)");
  }
}

void KVCache::reserve(int64_t tokens) {
  if (tokens <= capacity_) return;
  if (device_ == Device::cuda) {
    reserve_cuda(tokens);
    return;
  }
  if (dtype_ == DType::f32) {
    k_ = cpu::kv_cache_regrow(k_, batch_, kv_heads_, head_dim_, size_, capacity_, tokens);
    v_ = cpu::kv_cache_regrow(v_, batch_, kv_heads_, head_dim_, size_, capacity_, tokens);
  } else {
    k16_ = cpu::kv_cache_regrow(k16_, batch_, kv_heads_, head_dim_, size_, capacity_, tokens);
    v16_ = cpu::kv_cache_regrow(v16_, batch_, kv_heads_, head_dim_, size_, capacity_, tokens);
  }
  std::vector<int64_t> pos(static_cast<size_t>(batch_ * tokens));
  for (int64_t b = 0; b < batch_; ++b)
    std::copy_n(pos_.begin() + b * capacity_, size_, pos.begin() + b * tokens);
  pos_ = std::move(pos);
  capacity_ = tokens;
}

void KVCache::append(ConstTensorView k, ConstTensorView v, ConstTensorView positions) {
  if (device_ == Device::cuda) {
    append_cuda(k, v, positions);
    return;
  }
  const DType in_dtype = k.dtype == dtype_ ? dtype_ : DType::f32;
  if (k.dtype != in_dtype)
    fail(kOp, "k has dtype ", dtype_name(k.dtype), ": the cache stores ", dtype_name(dtype_),
         ", give f32 or ", dtype_name(dtype_));
  check_view(kOp, "k", k, in_dtype, {batch_, -1, kv_heads_, head_dim_});
  const int64_t T = k.shape[1];
  check_view(kOp, "v", v, in_dtype, {batch_, T, kv_heads_, head_dim_});
  std::vector<int64_t> pos(static_cast<size_t>(batch_ * T));
  if (positions.data != nullptr) {
    pos = detail::gather_positions(kOp, positions, 1, batch_, T);
  } else {
    for (int64_t b = 0; b < batch_; ++b)
      for (int64_t t = 0; t < T; ++t)
        pos[b * T + t] = (size_ > 0 ? pos_[b * capacity_ + size_ - 1] + 1 : 0) + t;
  }
  // Everything is validated before the cache changes: a failure leaves it as it was. Keys are
  // stored rotated: fp32 keys are rotated into an fp32 copy (rounded once when stored), 16-bit
  // keys into a 16-bit copy (widened, rotated in fp32, rounded once by the rotation).
  const int64_t n = batch_ * T * kv_heads_ * head_dim_;
  const std::array<int64_t, 3> rotated_strides = {T * kv_heads_ * head_dim_, kv_heads_ * head_dim_,
                                                  head_dim_};
  std::vector<float> rotated;
  std::vector<uint16_t> rotated16;
  Strided<const float, 4> keys;
  Strided<const uint16_t, 4> keys16;
  if (in_dtype == DType::f32)
    keys = strided<4>(k);
  else
    keys16 = strided16<4>(k);
  if (rope_) {
    detail::check_unit_last_stride(kOp, "k", k);
    const detail::RopePlan plan = detail::plan_rope(*rope_, pos, std::nullopt);
    detail::HeadRows rows;
    rows.dim = head_dim_;
    rows.dtype = in_dtype;
    if (in_dtype == DType::f32) {
      rotated.resize(static_cast<size_t>(n));
      rows.in = strided<3>(k);
      rows.out = {rotated.data(), {batch_, T, kv_heads_}, rotated_strides};
      keys = contiguous<const float, 4>(rotated.data(), {batch_, T, kv_heads_, head_dim_});
    } else {
      rotated16.resize(static_cast<size_t>(n));
      rows.in16 = strided16<3>(k);
      rows.out16 = {rotated16.data(), {batch_, T, kv_heads_}, rotated_strides};
      keys16 = contiguous<const uint16_t, 4>(rotated16.data(), {batch_, T, kv_heads_, head_dim_});
    }
    detail::rope_apply(plan, {batch_, T}, &rows, 1, false);
  }
  if (size_ + T > capacity_) reserve(std::max(size_ + T, 2 * capacity_));
  if (dtype_ == DType::f32) {
    cpu::kv_cache_store(keys, k_.data(), capacity_, size_);
    cpu::kv_cache_store(strided<4>(v), v_.data(), capacity_, size_);
  } else if (in_dtype == DType::f32) {
    cpu::kv_cache_store(keys, dtype_, k16_.data(), capacity_, size_);
    cpu::kv_cache_store(strided<4>(v), dtype_, v16_.data(), capacity_, size_);
  } else {
    cpu::kv_cache_store(keys16, k16_.data(), capacity_, size_);
    cpu::kv_cache_store(strided16<4>(v), v16_.data(), capacity_, size_);
  }
  for (int64_t b = 0; b < batch_; ++b)
    std::copy_n(pos.begin() + b * T, T, pos_.begin() + b * capacity_ + size_);
  size_ += T;
}

namespace {
// A (B, size, Hkv, D) view of a head-major store in its dtype.
ConstTensorView store_view(const void* data, DType dtype, int64_t B, int64_t size, int64_t H, int64_t D,
                           int64_t capacity) {
  const std::initializer_list<int64_t> shape = {B, size, H, D},
                                       strides = {H * capacity * D, D, capacity * D, 1};
  if (dtype == DType::bf16) return strided_view(static_cast<const bf16_t*>(data), shape, strides);
  if (dtype == DType::f16) return strided_view(static_cast<const f16_t*>(data), shape, strides);
  return strided_view(static_cast<const float*>(data), shape, strides);
}
}  // namespace

ConstTensorView KVCache::keys() const {
  const void* data = device_ == Device::cuda ? device_k_.get()
                     : dtype_ == DType::f32  ? static_cast<const void*>(k_.data())
                                             : k16_.data();
  ConstTensorView v = store_view(data, dtype_, batch_, size_, kv_heads_, head_dim_, capacity_);
  v.device = device_;
  return v;
}
ConstTensorView KVCache::values() const {
  const void* data = device_ == Device::cuda ? device_v_.get()
                     : dtype_ == DType::f32  ? static_cast<const void*>(v_.data())
                                             : v16_.data();
  ConstTensorView v = store_view(data, dtype_, batch_, size_, kv_heads_, head_dim_, capacity_);
  v.device = device_;
  return v;
}
ConstTensorView KVCache::positions() const {
  const int64_t* data =
      device_ == Device::cuda ? static_cast<const int64_t*>(device_pos_.get()) : pos_.data();
  return strided_view(data, {batch_, size_}, {capacity_, 1}, device_);
}

void KVCache::attend(const AttentionConfig& config, ConstTensorView q, TensorView out,
                     ConstTensorView q_positions, TensorView lse) const {
  if (device_ == Device::cuda) {
    attend_cuda(config, q, out, q_positions, lse);
    return;
  }
  if (config.rope != nullptr && config.rope != rope_)
    fail(kOp, "config.rope differs from the cache's rope (keys are stored rotated by the cache's rope)");
  if (config.rotate_values)
    fail(kOp,
         "config.rotate_values = true is not supported by the KV cache (its values are stored as given)");
  if (config.rope_offset != 0)
    fail(kOp, "config.rope_offset = ", config.rope_offset,
         " is invalid here: the cache's rope rotates whole heads");
  if (size_ == 0) fail(kOp, "attend on an empty cache; append keys and values first");
  const DType q_dtype = detail::activation_dtype(q);
  check_view(kOp, "q", q, q_dtype, {batch_, -1, -1, head_dim_});
  const int64_t T = q.shape[1], H = q.shape[2];
  std::vector<int64_t> qpos(static_cast<size_t>(batch_ * T));
  if (q_positions.data != nullptr) {
    qpos = detail::gather_positions(kOp, q_positions, 1, batch_, T);
  } else {
    if (T > size_) fail(kOp, "q has ", T, " tokens but the cache holds ", size_, ": give q_positions");
    for (int64_t b = 0; b < batch_; ++b)
      for (int64_t t = 0; t < T; ++t) qpos[b * T + t] = pos_[b * capacity_ + size_ - T + t];
  }
  std::vector<int64_t> kpos(static_cast<size_t>(batch_ * size_));
  for (int64_t b = 0; b < batch_; ++b)
    std::copy_n(pos_.begin() + b * capacity_, size_, kpos.begin() + b * size_);
  std::vector<float> q_rot;
  ConstTensorView q_used = q;
  // The cache's keys are rotated: q is rotated the same way. A 16-bit q is widened, rotated in fp32
  // and rounded once to its dtype, which is what Rope::forward returns for it (and what a model
  // running in that dtype attends with): attend(q) is the attention of rope(q) over keys(), values().
  if (rope_) {
    detail::check_unit_last_stride(kOp, "q", q);
    const detail::RopePlan plan = detail::plan_rope(*rope_, qpos, std::nullopt);
    q_rot.resize(static_cast<size_t>(batch_ * T * H * head_dim_));
    const Strided<float, 3> q_rows = {
        q_rot.data(), {batch_, T, H}, {T * H * head_dim_, H * head_dim_, head_dim_}};
    detail::HeadRows rows;
    rows.dim = head_dim_;
    rows.out = q_rows;
    if (q_dtype == DType::f32) {
      rows.in = strided<3>(q);
    } else {
      cpu::widen_rows(strided16<3>(q), q_dtype, head_dim_, q_rot.data());
      rows.in = q_rows;
    }
    detail::rope_apply(plan, {batch_, T}, &rows, 1, false);
    if (q_dtype != DType::f32) {  // rounded once to q's own dtype, as Rope::forward returns it
      std::vector<uint16_t> rounded(q_rot.size());
      cpu::narrow_row(q_dtype, q_rot.data(), static_cast<int64_t>(q_rot.size()), rounded.data());
      cpu::widen_row(q_dtype, rounded.data(), static_cast<int64_t>(rounded.size()), q_rot.data());
    }
    q_used = view(q_rot.data(), {batch_, T, H, head_dim_});
  }
  AttentionConfig inner = config;
  inner.rope = nullptr;
  AttentionInputs in = qkv(q_used, keys(), values());
  in.q_positions = view(qpos.data(), {batch_, T});
  in.k_positions = view(kpos.data(), {batch_, size_});
  detail::attention_forward_planned(detail::AttentionPlan(inner, in), out, lse);
}

namespace {
// The rows (B, size, Hkv) of a head-major store (B, Hkv, capacity, D), in place.
detail::HeadRows store_rows(float* f32, uint16_t* half, DType dtype, int64_t batch, int64_t heads,
                            int64_t dim, int64_t size, int64_t capacity) {
  const std::array<int64_t, 3> extent = {batch, size, heads},
                               stride = {heads * capacity * dim, dim, capacity * dim};
  detail::HeadRows rows;
  rows.dim = dim;
  rows.dtype = dtype;
  if (dtype == DType::f32)
    rows.in = rows.out = Strided<float, 3>{f32, extent, stride};
  else
    rows.in16 = rows.out16 = Strided<uint16_t, 3>{half, extent, stride};
  return rows;
}
}  // namespace

void KVCache::rotate_keys(const detail::RopePlan* first, bool first_inverse, const detail::RopePlan* second) {
  const detail::TokenGrid grid{batch_, size_};
  if (dtype_ == DType::f32 || second == nullptr) {  // one rotation: one rounding of 16-bit keys
    const detail::HeadRows rows =
        store_rows(k_.data(), k16_.data(), dtype_, batch_, kv_heads_, head_dim_, size_, capacity_);
    detail::rope_apply(*first, grid, &rows, 1, first_inverse);
    if (second) detail::rope_apply(*second, grid, &rows, 1, false);
    return;
  }
  // Two rotations of 16-bit keys: through an fp32 copy, rounded once at the end.
  std::vector<float> wide(static_cast<size_t>(batch_ * kv_heads_ * capacity_ * head_dim_));
  for (int64_t bh = 0; bh < batch_ * kv_heads_; ++bh)
    cpu::widen_row(dtype_, k16_.data() + bh * capacity_ * head_dim_, size_ * head_dim_,
                   wide.data() + bh * capacity_ * head_dim_);
  const detail::HeadRows rows =
      store_rows(wide.data(), nullptr, DType::f32, batch_, kv_heads_, head_dim_, size_, capacity_);
  detail::rope_apply(*first, grid, &rows, 1, first_inverse);
  detail::rope_apply(*second, grid, &rows, 1, false);
  for (int64_t bh = 0; bh < batch_ * kv_heads_; ++bh)
    cpu::narrow_row(dtype_, wide.data() + bh * capacity_ * head_dim_, size_ * head_dim_,
                    k16_.data() + bh * capacity_ * head_dim_);
}

void KVCache::shift_positions(int64_t delta) {
  if (delta < -detail::kMaxAbsPosition || delta > detail::kMaxAbsPosition)
    detail::fail_arg(kOp, "delta", delta, "must lie in [-2^53, 2^53]");
  if (rope_) {
    const RopeScalingType type = rope_->config().scaling.type;
    if (type == RopeScalingType::dynamic || type == RopeScalingType::longrope)
      fail(kOp, "shift_positions with rope_scaling '", rope_scaling_name(type),
           "': its keys may carry tables of different lengths; use rerotate");
    if (rope_->config().num_position_streams() != 1) fail(kOp, "shift_positions needs a one-stream rope");
  }
  if (device_ == Device::cuda) {
    shift_positions_cuda(delta);
    return;
  }
  std::vector<int64_t> shifted(static_cast<size_t>(batch_ * size_));
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t t = 0; t < size_; ++t) shifted[b * size_ + t] = pos_[b * capacity_ + t] + delta;
  detail::check_position_range(kOp, shifted);  // before anything changes
  if (rope_) {
    // R(delta) for every key: the rotation alone, without the attention factor the keys already carry.
    detail::RopePlan plan = detail::plan_rope(
        *rope_, std::vector<int64_t>(static_cast<size_t>(batch_ * size_), delta), int64_t{0});
    plan.freq.attention_factor = 1.0;
    rotate_keys(&plan, false, nullptr);
  }
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t t = 0; t < size_; ++t) pos_[b * capacity_ + t] = shifted[b * size_ + t];
}

void KVCache::erase_front(int64_t n) {
  if (n < 0 || n > size_)
    detail::fail_arg(kOp, "n", n, "must be in [0, size = " + std::to_string(size_) + "]");
  if (device_ == Device::cuda) {
    erase_front_cuda(n);
    return;
  }
  if (size_ > 0 && dtype_ == DType::f32)
    for (std::vector<float>* store : {&k_, &v_})
      cpu::kv_cache_erase_front(*store, batch_ * kv_heads_, head_dim_, capacity_, size_, n);
  if (size_ > 0 && dtype_ != DType::f32)
    for (std::vector<uint16_t>* store : {&k16_, &v16_})
      cpu::kv_cache_erase_front(*store, batch_ * kv_heads_, head_dim_, capacity_, size_, n);
  for (int64_t b = 0; b < batch_; ++b)
    std::copy(pos_.begin() + b * capacity_ + n, pos_.begin() + b * capacity_ + size_,
              pos_.begin() + b * capacity_);
  size_ -= n;
}

void KVCache::rerotate(int64_t from_seq_len, int64_t to_seq_len) {
  if (!rope_) fail(kOp, "rerotate needs a cache with a rope");
  if (from_seq_len < 0) detail::fail_arg(kOp, "from_seq_len", from_seq_len, "must be >= 0");
  if (to_seq_len < 0) detail::fail_arg(kOp, "to_seq_len", to_seq_len, "must be >= 0");
  if (rope_->config().num_position_streams() != 1) fail(kOp, "rerotate needs a one-stream rope");
  if (device_ == Device::cuda) {
    rerotate_cuda(from_seq_len, to_seq_len);
    return;
  }
  std::vector<int64_t> positions(static_cast<size_t>(batch_ * size_));
  for (int64_t b = 0; b < batch_; ++b)
    std::copy_n(pos_.begin() + b * capacity_, size_, positions.begin() + b * size_);
  // forward: k = a_from R_from(p) k0  ->  k0 = R_from(p)^T k / a_from, then k' = a_to R_to(p) k0.
  detail::RopePlan from = detail::plan_rope(*rope_, positions, from_seq_len);
  const detail::RopePlan to = detail::plan_rope(*rope_, std::move(positions), to_seq_len);
  from.freq.attention_factor = 1.0 / from.freq.attention_factor;
  rotate_keys(&from, true, &to);
}

}  // namespace posenc
