// src/kv_cache.cc: see posenc/kv_cache.h. Storage is head-major, (B, Hkv, capacity, D), grown by
// doubling: a decode step streams each head's keys and values contiguously (token-major storage
// puts every 512-byte row in its own 4 KiB page, which defeats the hardware prefetcher: measured
// 41 -> see BENCHMARKS.md). The attention sees strided views of the first `size` tokens.
#include "posenc/kv_cache.h"

#include <algorithm>
#include "src/attention_plan.h"
#include "src/check.h"
#include "src/cpu/kv_cache.h"
#include "src/rope_plan.h"

namespace posenc {
using detail::check_view;
using detail::fail;
namespace {
constexpr const char* kOp = "KVCache";
}

KVCache::KVCache(int64_t batch, int64_t kv_heads, int64_t head_dim, const Rope* rope)
    : batch_(batch), kv_heads_(kv_heads), head_dim_(head_dim), rope_(rope) {
  if (batch <= 0) detail::fail_arg(kOp, "batch", batch, "must be > 0");
  if (kv_heads <= 0) detail::fail_arg(kOp, "kv_heads", kv_heads, "must be > 0");
  if (head_dim <= 0) detail::fail_arg(kOp, "head_dim", head_dim, "must be > 0");
  if (rope && rope->config().head_dim != head_dim)
    fail(kOp, "rope.head_dim = ", rope->config().head_dim, " differs from head_dim = ", head_dim);
}

void KVCache::reserve(int64_t tokens) {
  if (tokens <= capacity_) return;
  k_ = cpu::kv_cache_regrow(k_, batch_, kv_heads_, head_dim_, size_, capacity_, tokens);
  v_ = cpu::kv_cache_regrow(v_, batch_, kv_heads_, head_dim_, size_, capacity_, tokens);
  std::vector<int64_t> pos(static_cast<size_t>(batch_ * tokens));
  for (int64_t b = 0; b < batch_; ++b)
    std::copy_n(pos_.begin() + b * capacity_, size_, pos.begin() + b * tokens);
  pos_ = std::move(pos);
  capacity_ = tokens;
}

void KVCache::append(ConstTensorView k, ConstTensorView v, ConstTensorView positions) {
  check_view(kOp, "k", k, DType::f32, {batch_, -1, kv_heads_, head_dim_});
  const int64_t T = k.shape[1];
  check_view(kOp, "v", v, DType::f32, {batch_, T, kv_heads_, head_dim_});
  std::vector<int64_t> pos(static_cast<size_t>(batch_ * T));
  if (positions.data != nullptr) {
    pos = detail::gather_positions(kOp, positions, 1, batch_, T);
  } else {
    for (int64_t b = 0; b < batch_; ++b)
      for (int64_t t = 0; t < T; ++t)
        pos[b * T + t] = (size_ > 0 ? pos_[b * capacity_ + size_ - 1] + 1 : 0) + t;
  }
  // Everything is validated before the cache changes: a failure leaves it as it was.
  Strided<const float, 4> keys = strided<4>(k);
  std::vector<float> rotated;
  if (rope_) {  // keys are stored rotated
    detail::check_unit_last_stride(kOp, "k", k);
    const detail::RopePlan plan = detail::plan_rope(*rope_, pos, std::nullopt);
    rotated.resize(static_cast<size_t>(batch_ * T * kv_heads_ * head_dim_));
    keys = contiguous<const float, 4>(rotated.data(), {batch_, T, kv_heads_, head_dim_});
    const detail::HeadRows rows{strided<3>(k),
                                {rotated.data(),
                                 {batch_, T, kv_heads_},
                                 {T * kv_heads_ * head_dim_, kv_heads_ * head_dim_, head_dim_}},
                                head_dim_};
    detail::rope_apply(plan, {batch_, T}, &rows, 1, false);
  }
  if (size_ + T > capacity_) reserve(std::max(size_ + T, 2 * capacity_));
  cpu::kv_cache_store(keys, k_.data(), capacity_, size_);
  cpu::kv_cache_store(strided<4>(v), v_.data(), capacity_, size_);
  for (int64_t b = 0; b < batch_; ++b)
    std::copy_n(pos.begin() + b * T, T, pos_.begin() + b * capacity_ + size_);
  size_ += T;
}

ConstTensorView KVCache::keys() const {
  return strided_view(k_.data(), {batch_, size_, kv_heads_, head_dim_},
                      {kv_heads_ * capacity_ * head_dim_, head_dim_, capacity_ * head_dim_, 1});
}
ConstTensorView KVCache::values() const {
  return strided_view(v_.data(), {batch_, size_, kv_heads_, head_dim_},
                      {kv_heads_ * capacity_ * head_dim_, head_dim_, capacity_ * head_dim_, 1});
}
ConstTensorView KVCache::positions() const {
  return strided_view(pos_.data(), {batch_, size_}, {capacity_, 1});
}

void KVCache::attend(const AttentionConfig& config, ConstTensorView q, TensorView out,
                     ConstTensorView q_positions, TensorView lse) const {
  if (config.rope != nullptr && config.rope != rope_)
    fail(kOp, "config.rope differs from the cache's rope (keys are stored rotated by the cache's rope)");
  if (config.rope_offset != 0)
    fail(kOp, "config.rope_offset = ", config.rope_offset,
         " is invalid here: the cache's rope rotates whole heads");
  if (size_ == 0) fail(kOp, "attend on an empty cache; append keys and values first");
  check_view(kOp, "q", q, DType::f32, {batch_, -1, -1, head_dim_});
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
  if (rope_) {  // the cache's keys are rotated: rotate q the same way
    detail::check_unit_last_stride(kOp, "q", q);
    const detail::RopePlan plan = detail::plan_rope(*rope_, qpos, std::nullopt);
    q_rot.resize(static_cast<size_t>(batch_ * T * H * head_dim_));
    const detail::HeadRows rows{strided<3>(q),
                                {q_rot.data(), {batch_, T, H}, {T * H * head_dim_, H * head_dim_, head_dim_}},
                                head_dim_};
    detail::rope_apply(plan, {batch_, T}, &rows, 1, false);
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
// Rotates every cached key of a head-major store (B, Hkv, capacity, D) by `plan` (positions
// (B, size)), in place.
void rotate_store(const detail::RopePlan& plan, std::vector<float>& store, int64_t batch, int64_t heads,
                  int64_t dim, int64_t size, int64_t capacity, bool inverse) {
  const Strided<float, 3> rows{
      store.data(), {batch, size, heads}, {heads * capacity * dim, dim, capacity * dim}};
  const detail::HeadRows keys{rows, rows, dim};
  detail::rope_apply(plan, {batch, size}, &keys, 1, inverse);
}
}  // namespace

void KVCache::shift_positions(int64_t delta) {
  if (delta < -detail::kMaxAbsPosition || delta > detail::kMaxAbsPosition)
    detail::fail_arg(kOp, "delta", delta, "must lie in [-2^53, 2^53]");
  std::vector<int64_t> shifted(static_cast<size_t>(batch_ * size_));
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t t = 0; t < size_; ++t) shifted[b * size_ + t] = pos_[b * capacity_ + t] + delta;
  detail::check_position_range(kOp, shifted);  // before anything changes
  if (rope_) {
    const RopeScalingType type = rope_->config().scaling.type;
    if (type == RopeScalingType::dynamic || type == RopeScalingType::longrope)
      fail(kOp, "shift_positions with rope_scaling '", rope_scaling_name(type),
           "': its keys may carry tables of different lengths; use rerotate");
    if (rope_->config().num_position_streams() != 1) fail(kOp, "shift_positions needs a one-stream rope");
    // R(delta) for every key: the rotation alone, without the attention factor the keys already carry.
    detail::RopePlan plan = detail::plan_rope(
        *rope_, std::vector<int64_t>(static_cast<size_t>(batch_ * size_), delta), int64_t{0});
    plan.freq.attention_factor = 1.0;
    rotate_store(plan, k_, batch_, kv_heads_, head_dim_, size_, capacity_, false);
  }
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t t = 0; t < size_; ++t) pos_[b * capacity_ + t] = shifted[b * size_ + t];
}

void KVCache::erase_front(int64_t n) {
  if (n < 0 || n > size_)
    detail::fail_arg(kOp, "n", n, "must be in [0, size = " + std::to_string(size_) + "]");
  for (std::vector<float>* store : {&k_, &v_})
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
  std::vector<int64_t> positions(static_cast<size_t>(batch_ * size_));
  for (int64_t b = 0; b < batch_; ++b)
    std::copy_n(pos_.begin() + b * capacity_, size_, positions.begin() + b * size_);
  // forward: k = a_from R_from(p) k0  ->  k0 = R_from(p)^T k / a_from, then k' = a_to R_to(p) k0.
  detail::RopePlan from = detail::plan_rope(*rope_, positions, from_seq_len);
  const detail::RopePlan to = detail::plan_rope(*rope_, std::move(positions), to_seq_len);
  from.freq.attention_factor = 1.0 / from.freq.attention_factor;
  rotate_store(from, k_, batch_, kv_heads_, head_dim_, size_, capacity_, true);
  rotate_store(to, k_, batch_, kv_heads_, head_dim_, size_, capacity_, false);
}

}  // namespace posenc
