// src/bias.cc: front ends of the scalar biases on the logits: the learned relative biases (clipped,
// T5 buckets) and ALiBi. Validation, slopes and buckets on the host; the loops are in src/cpu/bias.cc.
#include "posenc/bias.h"

#include <algorithm>
#include <cmath>

#include "src/bias_plan.h"
#include "src/check.h"
#include "src/cpu/bias.h"
#if POSENC_WITH_CUDA
#include "src/cuda/bias.h"
#include "src/cuda/device.h"
#endif

namespace posenc {
using detail::check_positive;
using detail::check_view;
using detail::fail;
using detail::fail_arg;

// ---------------------------------------------------------------- ALiBi slopes
void validate(const AlibiConfig& c) {
  if (c.heads <= 0) fail_arg("alibi", "heads", c.heads, "must be > 0");
  if (c.heads > (int64_t{1} << 20)) fail_arg("alibi", "heads", c.heads, "must be <= 2^20");
  if (c.slopes == AlibiSlopes::mpt) {
    check_positive("alibi", "alibi_bias_max", c.alibi_bias_max);
    // The smallest slope is 2^-alibi_bias_max: at most 126 keeps every slope a normal float32 (> 0).
    if (c.alibi_bias_max > 126)
      fail_arg("alibi", "alibi_bias_max", c.alibi_bias_max,
               "must be <= 126 (the smallest slope 2^-alibi_bias_max stays a normal float32 > 0)");
  }
}

std::vector<double> alibi_slopes(const AlibiConfig& c) {
  validate(c);
  const int64_t n = c.heads;
  std::vector<double> slopes;
  if (c.slopes == AlibiSlopes::bloom) {
    // Press et al. get_slopes / BLOOM build_alibi_tensor.
    int64_t closest = 1;
    while (closest * 2 <= n) closest *= 2;
    // base^i with base = 2^(-8/closest), written as one exp2 so powers of two come out exact.
    const double c = static_cast<double>(closest);
    for (int64_t i = 1; i <= closest; ++i) slopes.push_back(std::exp2(-8.0 * static_cast<double>(i) / c));
    // extra_base^(2i+1) with extra_base = 2^(-4/closest): every other slope of 2 * closest heads.
    for (int64_t i = 0; i < n - closest; ++i)
      slopes.push_back(std::exp2(-4.0 * static_cast<double>(2 * i + 1) / c));
  } else {
    // MPT gen_slopes: m_i = i * max / n' for n' = 2^ceil(log2 n); odd-indexed first, then even.
    int64_t np2 = 1;
    while (np2 < n) np2 *= 2;
    std::vector<double> all(np2);
    for (int64_t i = 0; i < np2; ++i)
      all[i] = std::exp2(-static_cast<double>(i + 1) * c.alibi_bias_max / static_cast<double>(np2));
    if (np2 == n) {
      slopes = all;
    } else {
      for (int64_t i = 1; i < np2; i += 2) slopes.push_back(all[i]);
      for (int64_t i = 0; i < np2; i += 2) slopes.push_back(all[i]);
      slopes.resize(n);
    }
  }
  return slopes;
}

// ---------------------------------------------------------------- relative bias rows (clipped, T5)
RelativeBiasConfig RelativeBiasConfig::clipped(int64_t heads, int64_t max_distance) {
  RelativeBiasConfig c;
  c.heads = heads;
  c.bucketing = Bucketing::clipped;
  c.max_distance = max_distance;
  return c;
}
RelativeBiasConfig RelativeBiasConfig::t5(int64_t heads, int64_t num_buckets, int64_t max_distance,
                                          bool bidirectional) {
  RelativeBiasConfig c;
  c.heads = heads;
  c.bucketing = Bucketing::t5;
  c.num_buckets = num_buckets;
  c.max_distance = max_distance;
  c.bidirectional = bidirectional;
  return c;
}
int64_t RelativeBiasConfig::num_rows() const {
  return bucketing == Bucketing::t5 ? num_buckets : 2 * max_distance + 1;
}

void validate(const RelativeBiasConfig& c) {
  const char* op = c.bucketing == Bucketing::t5 ? "t5_bias" : "relative_bias";
  if (c.heads <= 0) fail_arg(op, "heads", c.heads, "must be > 0");
  if (c.bucketing == Bucketing::clipped) {
    if (c.max_distance < 0 || c.max_distance > (int64_t{1} << 30))
      fail_arg(op, "max_distance", c.max_distance, "must be in [0, 2^30]");
    return;
  }
  const int64_t exact = c.bidirectional ? c.num_buckets / 4 : c.num_buckets / 2;
  if (c.num_buckets < (c.bidirectional ? 4 : 2) || c.num_buckets > (int64_t{1} << 20))
    fail_arg(op, "num_buckets", c.num_buckets,
             c.bidirectional ? "must be in [4, 2^20] when bidirectional" : "must be in [2, 2^20]");
  if (c.max_distance <= exact)
    fail_arg(op, "max_distance", c.max_distance,
             "must exceed the exact buckets (num_buckets/" + std::string(c.bidirectional ? "4" : "2") +
                 " = " + std::to_string(exact) + ")");
}

int64_t t5_bucket(int64_t relative_position, bool bidirectional, int64_t num_buckets, int64_t max_distance) {
  int64_t bucket = 0;
  int64_t n;
  if (bidirectional) {
    num_buckets /= 2;
    if (relative_position > 0) bucket += num_buckets;
    n = relative_position < 0 ? -relative_position : relative_position;
  } else {
    n = relative_position < 0 ? -relative_position : 0;
  }
  const int64_t max_exact = num_buckets / 2;
  if (n < max_exact) return bucket + n;
  // T5 / HF evaluate this in float32: log(n / max_exact) / log(max_distance / max_exact) * (nb - max_exact),
  // the second log in double (Python's math.log) then rounded to float with the tensor op.
  const float ratio = static_cast<float>(n) / static_cast<float>(max_exact);
  const float log_range =
      static_cast<float>(std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)));
  const float scaled = std::log(ratio) / log_range * static_cast<float>(num_buckets - max_exact);
  const int64_t large = max_exact + static_cast<int64_t>(scaled);
  return bucket + std::min(large, num_buckets - 1);
}

int64_t relative_bias_row(const RelativeBiasConfig& c, int64_t d) {
  if (c.bucketing == Bucketing::t5) return t5_bucket(d, c.bidirectional, c.num_buckets, c.max_distance);
  return std::clamp(d, -c.max_distance, c.max_distance) + c.max_distance;
}

// ---------------------------------------------------------------- the bias plan (src/bias_plan.h)
namespace detail {
float Bias::value(int64_t d, int64_t head) const {
  if (slopes) {
    const double m = slopes[head];
    return static_cast<float>(symmetric ? -m * static_cast<double>(d < 0 ? -d : d)
                                        : m * static_cast<double>(d));
  }
  return table(relative_bias_row(*rows_config, d), head);
}

DistanceRange distance_range(const std::vector<int64_t>& q_pos, const std::vector<int64_t>& k_pos) {
  DistanceRange r;
  if (q_pos.empty() || k_pos.empty()) return r;
  const auto [qmin, qmax] = std::minmax_element(q_pos.begin(), q_pos.end());
  const auto [kmin, kmax] = std::minmax_element(k_pos.begin(), k_pos.end());
  r.lo = *kmin - *qmax;
  r.hi = *kmax - *qmin;
  // Tabulate when the range is comparable to the block (always, for ordinary sequences).
  const int64_t limit = 4 * static_cast<int64_t>(q_pos.size() + k_pos.size()) + 4096;
  r.use_lut = r.hi - r.lo < limit;
  return r;
}

std::vector<int32_t> saturating_rows(const RelativeBiasConfig& config, int64_t* limit) {
  int64_t l = config.max_distance;
  // Rows are monotone in d on each side (log and float rounding are monotone), so once both d = +-l give
  // the row of every larger |d| (checked one step further out), the table can stop there.
  const auto saturated = [&](int64_t at) {
    return relative_bias_row(config, at) == relative_bias_row(config, at + 1) &&
           relative_bias_row(config, -at) == relative_bias_row(config, -at - 1) &&
           relative_bias_row(config, at) == relative_bias_row(config, (int64_t{1} << 53)) &&
           relative_bias_row(config, -at) == relative_bias_row(config, -(int64_t{1} << 53));
  };
  while (!saturated(l)) ++l;
  *limit = l;
  std::vector<int32_t> rows(static_cast<size_t>(2 * l + 1));
  for (int64_t d = -l; d <= l; ++d)
    rows[static_cast<size_t>(d + l)] = static_cast<int32_t>(relative_bias_row(config, d));
  return rows;
}
}  // namespace detail

// ---------------------------------------------------------------- blocks
namespace {
const char* op_name(const RelativeBiasConfig& c) {
  return c.bucketing == Bucketing::t5 ? "t5_bias" : "relative_bias";
}

struct Block {
  std::vector<int64_t> q, k;
};
// The positions of a (H, Q, K) block of logits (bias values or their gradient); a bf16 / fp16 block
// needs a unit stride on K.
Block gather_block(const char* op, ConstTensorView q_positions, ConstTensorView k_positions,
                   const ViewShape& v, const void* data, const char* name, int64_t heads) {
  const int64_t nq = q_positions.rank == 1 ? q_positions.shape[0] : -1;
  const int64_t nk = k_positions.rank == 1 ? k_positions.shape[0] : -1;
  check_view(op, name, v, detail::activation_dtype(v), {heads, nq, nk}, data);
  if (detail::activation_dtype(v) != DType::f32) detail::check_unit_last_stride(op, name, v);
  return {detail::gather_positions_1d(op, "q_positions", q_positions, v.shape[1]),
          detail::gather_positions_1d(op, "k_positions", k_positions, v.shape[2])};
}

// ---------------------------------------------------------------- the CUDA path
// A block (H, Q, K) of device memory, its positions on the device (Q) and (K): checked, nothing read.
#if POSENC_WITH_CUDA
struct DeviceBlock {
  cuda::DevicePositions q, k;
};
DeviceBlock check_device_block(const char* op, ConstTensorView q_positions, ConstTensorView k_positions,
                               const ViewShape& v, const void* data, const char* name, int64_t heads) {
  const int64_t nq = q_positions.rank == 1 ? q_positions.shape[0] : -1;
  const int64_t nk = k_positions.rank == 1 ? k_positions.shape[0] : -1;
  check_view(op, name, v, detail::activation_dtype(v), {heads, nq, nk}, data, Device::cuda);
  if (detail::activation_dtype(v) != DType::f32) detail::check_unit_last_stride(op, name, v);
  check_view(op, "q_positions", q_positions, DType::i64, {v.shape[1]}, q_positions.data, Device::cuda);
  check_view(op, "k_positions", k_positions, DType::i64, {v.shape[2]}, k_positions.data, Device::cuda);
  cuda::check_device_memory(op, name, v, data);
  cuda::check_device_memory(op, "q_positions", q_positions, q_positions.data);
  cuda::check_device_memory(op, "k_positions", k_positions, k_positions.data);
  return {{q_positions.ptr<int64_t>(), q_positions.strides[0]},
          {k_positions.ptr<int64_t>(), k_positions.strides[0]}};
}

#endif

}  // namespace

#if POSENC_WITH_CUDA
// The learned table's rows as the device looks them up: clipped arithmetic, or T5's saturating row table.
cuda::DeviceBias cuda::learned_bias_rows(std::string_view op, const RelativeBiasConfig& config) {
  DeviceBias b;
  if (config.bucketing == Bucketing::clipped) {
    b.kind = BiasKind::clipped;
    b.limit = config.max_distance;
    return b;
  }
  const int64_t max_limit = (kMaxDeviceRowTable - 1) / 2;
  if (config.max_distance >= max_limit)
    fail_arg(op, "max_distance", config.max_distance,
             "must be below " + std::to_string(max_limit) +
                 " on cuda tensors (the kernels take T5's rows by value)");
  b.kind = BiasKind::row_table;
  b.rows = detail::saturating_rows(config, &b.limit);
  if (2 * b.limit + 1 > kMaxDeviceRowTable)
    fail_arg(op, "max_distance", config.max_distance, "gives a row table too large for the CUDA kernels");
  return b;
}
#endif

void relative_bias(const RelativeBiasConfig& config, ConstTensorView table, ConstTensorView q_positions,
                   ConstTensorView k_positions, TensorView out) {
  validate(config);
  const char* op = op_name(config);
  check_view(op, "table", table, DType::f32, {config.num_rows(), config.heads}, table.data, out.device);
  if (out.device == Device::cuda) {
#if POSENC_WITH_CUDA
    const DeviceBlock b =
        check_device_block(op, q_positions, k_positions, out, out.data, "out", config.heads);
    cuda::check_device_memory(op, "table", table, table.data);
    cuda::BiasBlockLaunch l;
    l.bias = cuda::learned_bias_rows(op, config);
    l.bias.table = table.ptr<float>();
    l.bias.table_strides[0] = table.strides[0], l.bias.table_strides[1] = table.strides[1];
    l.heads = config.heads, l.q = out.shape[1], l.k = out.shape[2];
    l.q_positions = b.q, l.k_positions = b.k;
    l.dtype = out.dtype;
    l.out = out.data;
    for (int d = 0; d < 3; ++d) l.out_strides[d] = out.strides[d];
    cuda::bias_block(l);
    return;
#else
    detail::fail_without_cuda(op, "out");
#endif
  }
  const Block b = gather_block(op, q_positions, k_positions, out, out.data, "out", config.heads);
  cpu::Bias bias;
  bias.rows_config = &config;
  bias.table = strided<2>(table);
  if (detail::activation_dtype(out) != DType::f32)
    cpu::bias_block16(bias, b.q, b.k, strided16<3>(out), out.dtype);
  else
    cpu::bias_block(bias, b.q, b.k, strided<3>(out));
}

void relative_bias_backward(const RelativeBiasConfig& config, ConstTensorView grad_out,
                            ConstTensorView q_positions, ConstTensorView k_positions, TensorView grad_table) {
  validate(config);
  const char* op = op_name(config);
  check_view(op, "grad_table", grad_table, DType::f32, {config.num_rows(), config.heads}, grad_table.data,
             grad_out.device);
  if (grad_out.device == Device::cuda) {
#if POSENC_WITH_CUDA
    const DeviceBlock b =
        check_device_block(op, q_positions, k_positions, grad_out, grad_out.data, "grad_out", config.heads);
    cuda::check_device_memory(op, "grad_table", grad_table, grad_table.data);
    if (config.num_rows() > cuda::kMaxDeviceBiasRows)
      fail(op, "the table has ", config.num_rows(), " rows, more than the CUDA gradient takes (",
           cuda::kMaxDeviceBiasRows, ")");
    cuda::BiasBackwardLaunch l;
    l.bias = cuda::learned_bias_rows(op, config);
    l.num_rows = config.num_rows();
    l.heads = config.heads, l.q = grad_out.shape[1], l.k = grad_out.shape[2];
    l.q_positions = b.q, l.k_positions = b.k;
    l.dtype = grad_out.dtype;
    l.grad = grad_out.data;
    for (int d = 0; d < 3; ++d) l.grad_strides[d] = grad_out.strides[d];
    l.grad_table = grad_table.ptr<float>();
    l.grad_table_strides[0] = grad_table.strides[0], l.grad_table_strides[1] = grad_table.strides[1];
    cuda::bias_block_backward(l);
    return;
#else
    detail::fail_without_cuda(op, "grad_out");
#endif
  }
  const Block b =
      gather_block(op, q_positions, k_positions, grad_out, grad_out.data, "grad_out", config.heads);
  if (detail::activation_dtype(grad_out) != DType::f32)
    cpu::bias_block_backward(config, b.q, b.k, strided16<3>(grad_out), grad_out.dtype,
                             strided<2>(grad_table));
  else
    cpu::bias_block_backward(config, b.q, b.k, strided<3>(grad_out), strided<2>(grad_table));
}

void alibi_bias(const AlibiConfig& config, ConstTensorView q_positions, ConstTensorView k_positions,
                TensorView out) {
  const std::vector<double> slopes = alibi_slopes(config);
  if (out.device == Device::cuda) {
#if POSENC_WITH_CUDA
    const DeviceBlock b =
        check_device_block("alibi", q_positions, k_positions, out, out.data, "out", config.heads);
    if (config.heads > cuda::kMaxDeviceBiasHeads)
      fail_arg("alibi", "heads", config.heads,
               "must be <= " + std::to_string(cuda::kMaxDeviceBiasHeads) + " on cuda tensors");
    cuda::BiasBlockLaunch l;
    l.bias.kind = cuda::BiasKind::alibi;
    l.bias.slopes = slopes;
    l.bias.symmetric = config.symmetric;
    l.heads = config.heads, l.q = out.shape[1], l.k = out.shape[2];
    l.q_positions = b.q, l.k_positions = b.k;
    l.dtype = out.dtype;
    l.out = out.data;
    for (int d = 0; d < 3; ++d) l.out_strides[d] = out.strides[d];
    cuda::bias_block(l);
    return;
#else
    detail::fail_without_cuda("alibi", "out");
#endif
  }
  const Block b = gather_block("alibi", q_positions, k_positions, out, out.data, "out", config.heads);
  cpu::Bias bias;
  bias.slopes = slopes.data();
  bias.symmetric = config.symmetric;
  if (detail::activation_dtype(out) != DType::f32)
    cpu::bias_block16(bias, b.q, b.k, strided16<3>(out), out.dtype);
  else
    cpu::bias_block(bias, b.q, b.k, strided<3>(out));
}

}  // namespace posenc
