// lab/model_passes.cc: the forward and backward passes of the lab's model (see model.h), one
// numbered step per layer of the forward, mirrored in reverse by the backward (llm.c's order).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "attention.h"
#include "kernels.h"
#include "model.h"
#include "ops.h"
#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/threads.h"
#include "rng.h"

namespace posenc::lab {

namespace {

struct LayerOffsets {  // into the flat parameter buffer; -1 where the model has no such tensor
  int64_t norm1_w, norm1_b, qkv_w, qkv_b, proj_w, proj_b, norm2_w, norm2_b, fc_w, fc_b, fcproj_w, fcproj_b;
  std::string prefix;  // "layers.<l>.": the encodings' tensors are found by name under it
};

// An array of the step (an activation, a backward buffer): n floats of the Arena, from a cache line, so that
// rows of whole vectors are whole lines.
struct Floats {
  float* p = nullptr;
  size_t n = 0;
  float* data() const { return p; }
  float* begin() const { return p; }
  float* end() const { return p + n; }
};

// The step's arrays in one block of memory, zeroed, aligned to 2 MiB and, on Linux, offered to the kernel's
// transparent huge pages (madvise; a hint: where they are not enabled, 4 KiB pages as before): the step
// passes over ~20 MiB, which at 4 KiB a page is more pages than the core's TLB holds (walks on every
// pass); in 2 MiB pages a dozen entries. No effect on any result.
class Arena {
 public:
  static constexpr size_t kAlign = size_t{2} << 20;
  void carve(const std::vector<std::pair<Floats*, size_t>>& arrays) {
    auto line = [](size_t n) { return (n + 15) / 16 * 16; };  // floats to a whole 64-byte line
    size_t floats = 0;
    for (const auto& [array, n] : arrays) floats += line(n);
    const size_t bytes = std::max<size_t>((floats * sizeof(float) + kAlign - 1) / kAlign * kAlign, kAlign);
    block_.reset();
    block_.reset(static_cast<float*>(std::aligned_alloc(kAlign, bytes)));
    if (!block_) throw Error("lab model: cannot allocate the step's " + std::to_string(bytes) + " bytes");
#if defined(__linux__)
    madvise(block_.get(), bytes, MADV_HUGEPAGE);  // a hint only: its failure leaves 4 KiB pages
#endif
    std::memset(block_.get(), 0, bytes);
    float* at = block_.get();
    for (const auto& [array, n] : arrays) *array = {at, n}, at += line(n);
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> block_;
};

// The norms' outputs are not kept: the backward recomputes the rows it needs from their input and statistics
// (ops::norm_apply, the same bits), in cache, instead of reading what the forward wrote to memory.
struct LayerActs {                // saved by the forward for the backward
  Floats norm1_mean, norm1_rstd;  // (N), (N)
  Floats qkv;                     // (N, 3C): q | k | v per token
  Floats atty, lse;               // (N, C) = (B, T, H, D); (B, H, T)
  Floats res2;                    // (N, C) = x + attention
  Floats norm2_mean, norm2_rstd;
  Floats fch_dgelu, fch_gelu;  // (N, F): gelu'(fc(x)) and gelu(fc(x))
  Floats res3;                 // (N, C) = the layer's output
};

// Rows per chunk of the MLP's backward: its d fc (kMlpRows x mlp floats: 256 KiB at mlp 512) within L2.
constexpr int64_t kMlpRows = 128;
// Rows per chunk of the attention's backward and the products beside it (whole windows, at least one): its
// dqkv (kQkvRows x 3 d_model floats: 192 KiB at d_model 64) within L2.
constexpr int64_t kQkvRows = 256;
// Rows per chunk of the cross-entropy's, the output projection's and the final norm's backward on one thread:
// its d logits (kHeadRows x vocabulary floats: 64 KiB at 63) within L2. On more threads the head's and
// norm2's backward take every row at once: a chunk's rows are too few for the norms and the cross-entropy to
// split between the threads (measured: chunks are faster on one thread, slower on two).
constexpr int64_t kHeadRows = 256;

int64_t find_offset(const std::vector<ParamSlice>& layout, const std::string& name) {
  for (const ParamSlice& s : layout)
    if (s.name == name) return s.offset;
  return -1;
}

}  // namespace

struct Model::Impl {
  std::vector<LayerOffsets> layer;
  int64_t wte = -1, normf_w = -1, normf_b = -1;
  std::optional<Rope> rope;
  LabAttention attention;

  // The last forward's batch.
  int64_t B = 0, T = 0;
  int64_t counted = 0;  // targets that count (not kIgnoreTarget)
  bool has_forward = false;
  std::vector<int32_t> tokens, targets;
  std::vector<int64_t> positions;  // (T): 0 .. T-1, every window starts at position 0
  Floats x0;                       // (N, C) embeddings (+ absolute code)
  std::vector<LayerActs> acts;
  Floats normf_mean, normf_rstd, probs;  // (N), (N), (N, V): normf's out is recomputed by the backward
  std::vector<float> losses;             // (N)
  // (N, C): a norm's out (norm1, norm2, normf), written by the forward for the product that follows, and the
  // rows of a chunk of the backward's
  Floats normed;
  // Backward scratch; dfch holds the MLP's d fc for kMlpRows rows at a time.
  Floats dres, dnorm, dqkv, datty, dfch, dlogits;
  Arena arena;  // every Floats above and in acts

  void resize(const ModelConfig& c, int64_t b, int64_t t) {
    if (b == B && t == T) return;
    B = b, T = t;
    const auto N = static_cast<size_t>(b * t), C = static_cast<size_t>(c.d_model),
               F = static_cast<size_t>(c.mlp);
    const auto V = static_cast<size_t>(c.vocab_size);
    positions.resize(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) positions[static_cast<size_t>(i)] = i;
    losses.resize(N);
    acts.resize(static_cast<size_t>(c.layers));
    std::vector<std::pair<Floats*, size_t>> arrays{{&x0, N * C}, {&normed, N * C}};
    for (LayerActs& a : acts) {
      for (auto* v : {&a.norm1_mean, &a.norm1_rstd, &a.norm2_mean, &a.norm2_rstd}) arrays.emplace_back(v, N);
      arrays.insert(arrays.end(), {{&a.qkv, N * 3 * C},
                                   {&a.atty, N * C},
                                   {&a.lse, N * static_cast<size_t>(c.heads)},
                                   {&a.res2, N * C},
                                   {&a.fch_dgelu, N * F},
                                   {&a.fch_gelu, N * F},
                                   {&a.res3, N * C}});
    }
    arrays.insert(arrays.end(), {{&normf_mean, N},
                                 {&normf_rstd, N},
                                 {&probs, N * V},
                                 {&dres, N * C},
                                 {&dnorm, N * C},
                                 {&dqkv, N * 3 * C},
                                 {&datty, N * C},
                                 {&dfch, std::min(N, static_cast<size_t>(kMlpRows)) * F},
                                 {&dlogits, N * V}});
    arena.carve(arrays);
  }
};

Model::Model(const ModelConfig& config, uint64_t seed)
    : config_(config), layout_(model_layout(config)), impl_(std::make_unique<Impl>()) {
  const ParamSlice& last = layout_.back();
  params_.assign(static_cast<size_t>(last.offset + last.size), 0.0f);
  grads_.assign(params_.size(), 0.0f);
  for (const ParamSlice& s : layout_) {
    Rng rng(seed, s.name);
    for (int64_t i = 0; i < s.size; ++i)
      params_[static_cast<size_t>(s.offset + i)] =
          s.init_one ? 1.0f : static_cast<float>(s.init_std * rng.normal());
  }
  Impl& m = *impl_;
  m.wte = find_offset(layout_, "wte.weight");
  m.normf_w = find_offset(layout_, "normf.weight");
  m.normf_b = find_offset(layout_, "normf.bias");
  for (int64_t l = 0; l < config_.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    auto at = [&](const char* name) { return find_offset(layout_, p + name); };
    m.layer.push_back({at("norm1.weight"), at("norm1.bias"), at("attn.qkv.weight"), at("attn.qkv.bias"),
                       at("attn.proj.weight"), at("attn.proj.bias"), at("norm2.weight"), at("norm2.bias"),
                       at("mlp.fc.weight"), at("mlp.fc.bias"), at("mlp.proj.weight"), at("mlp.proj.bias"),
                       p});
  }
  set_rope_eval(RopeEval::plain, config_.train_len);
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

void Model::set_rope_eval(RopeEval mode, int64_t eval_len) {
  if (!config_.encoding.has(EncodingKind::rope)) return;
  impl_->rope.emplace(
      lab_rope_config(config_.options, config_.head_dim(), config_.train_len, mode, eval_len));
}

const std::vector<float>& Model::token_losses() const { return impl_->losses; }

std::vector<int32_t> Model::predictions() const {
  const Impl& m = *impl_;
  if (!m.has_forward) throw Error("lab model: predictions need a completed forward");
  const int64_t N = m.B * m.T, V = config_.vocab_size;
  std::vector<int32_t> out(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    const float* p = m.probs.data() + n * V;
    out[static_cast<size_t>(n)] = static_cast<int32_t>(std::max_element(p, p + V) - p);  // first of ties
  }
  return out;
}

void Model::zero_grad() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

namespace {

// The encodings' tensors under `prefix` ("" for the model's, "layers.<l>." for a layer's), viewed
// in `base` (the parameters or the gradients).
registry::TensorLookup tensors_in(const std::vector<ParamSlice>& layout, const std::string& prefix,
                                  float* base) {
  return [&layout, prefix, base](const std::string& name) {
    const int64_t offset = find_offset(layout, prefix + name);
    if (offset < 0) throw Error("lab model: no tensor '" + prefix + name + "' in the layout");
    return base + offset;
  };
}

// The attention configuration of one layer: causal, with each encoding's part (from its entry).
AttentionConfig attention_config(const ModelConfig& c, const registry::TensorLookup& params,
                                 const Rope* rope) {
  AttentionConfig cfg;
  cfg.causal = true;
  const registry::LabModel shape = lab_model(c, rope);
  for (const registry::Entry* e : c.encoding.entries())
    if (e->lab.configure_attention) e->lab.configure_attention(shape, params, cfg);
  return cfg;
}

}  // namespace

double Model::forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T) {
  const ModelConfig& c = config_;
  if (B < 1 || T < 1)
    throw Error("lab model: forward batch " + std::to_string(B) + " x " + std::to_string(T) + " is empty");
  int64_t counted = 0;
  auto check = [&](int32_t id, int64_t i, const char* what) {
    if (id < 0 || id >= c.vocab_size)
      throw Error(std::string("lab model: ") + what + " id " + std::to_string(id) + " at " +
                  std::to_string(i) + " is outside the vocabulary of " + std::to_string(c.vocab_size));
  };
  for (int64_t i = 0; i < B * T; ++i) {
    check(tokens[i], i, "token");
    if (targets[i] == ops::kIgnoreTarget) continue;
    check(targets[i], i, "target");
    ++counted;
  }
  if (counted == 0) throw Error("lab model: forward has no counted target (every target is ignored)");
  Impl& m = *impl_;
  m.has_forward = false;
  m.resize(c, B, T);
  m.tokens.assign(tokens, tokens + B * T);
  m.targets.assign(targets, targets + B * T);
  m.counted = counted;
  const int64_t N = B * T, C = c.d_model, H = c.heads, D = c.head_dim(), F = c.mlp, V = c.vocab_size;
  const float* P = params_.data();
  const auto positions = view(m.positions.data(), {T});

  // 1. embeddings (scaled by sqrt(C)) plus the absolute code, if any
  ops::embedding_forward(m.x0.data(), m.tokens.data(), P + m.wte, std::sqrt(static_cast<float>(C)), N, C);
  const auto x0 = view(m.x0.data(), {B, T, C});
  const registry::LabModel shape = lab_model(c);
  for (const registry::Entry* e : c.encoding.entries())  // throws where undefined at T (a table's end)
    if (e->lab.add_to_embeddings)
      e->lab.add_to_embeddings(shape, tensors_in(layout_, "", params_.data()), positions, x0);

  const float* x = m.x0.data();
  for (int64_t l = 0; l < c.layers; ++l) {
    const LayerOffsets& o = m.layer[static_cast<size_t>(l)];
    LayerActs& a = m.acts[static_cast<size_t>(l)];
    // 2. norm1 -> qkv projection
    ops::norm_forward(c.norm, m.normed.data(), a.norm1_mean.data(), a.norm1_rstd.data(), x, P + o.norm1_w,
                      o.norm1_b >= 0 ? P + o.norm1_b : nullptr, N, C);
    ops::matmul_forward(a.qkv.data(), m.normed.data(), P + o.qkv_w, P + o.qkv_b, N, C, 3 * C);
    // 3. causal attention with the encoding (attention.h: the lab's kernels or posenc's)
    const auto params = tensors_in(layout_, o.prefix, params_.data());
    m.attention.forward(attention_config(c, params, m.rope ? &*m.rope : nullptr), a.qkv.data(), B, T, H, D,
                        positions, a.atty.data(), a.lse.data());
    // 4. output projection plus the residual x
    ops::matmul_forward(a.res2.data(), a.atty.data(), P + o.proj_w, P + o.proj_b, N, C, C, x);
    // 5. norm2 -> MLP (fc with GELU, proj plus the residual res2)
    ops::norm_forward(c.norm, m.normed.data(), a.norm2_mean.data(), a.norm2_rstd.data(), a.res2.data(),
                      P + o.norm2_w, o.norm2_b >= 0 ? P + o.norm2_b : nullptr, N, C);
    ops::matmul_forward(a.fch_dgelu.data(), m.normed.data(), P + o.fc_w, P + o.fc_b, N, C, F, nullptr,
                        a.fch_gelu.data(), true);
    ops::matmul_forward(a.res3.data(), a.fch_gelu.data(), P + o.fcproj_w, P + o.fcproj_b, N, F, C,
                        a.res2.data());
    x = a.res3.data();
  }
  // 6. final norm, tied output projection, cross-entropy
  ops::norm_forward(c.norm, m.normed.data(), m.normf_mean.data(), m.normf_rstd.data(), x, P + m.normf_w,
                    m.normf_b >= 0 ? P + m.normf_b : nullptr, N, C);
  ops::matmul_forward(m.probs.data(), m.normed.data(), P + m.wte, nullptr, N, C,
                      V);  // logits, softmaxed in place
  ops::crossentropy_forward(m.probs.data(), m.losses.data(), m.probs.data(), m.targets.data(), N, V);
  double total = 0.0;
  for (float loss : m.losses) total += loss;  // ignored targets add 0
  m.has_forward = true;
  return total / static_cast<double>(counted);
}

void Model::backward() {
  Impl& m = *impl_;
  if (!m.has_forward) throw Error("lab model: backward needs a completed forward");
  const ModelConfig& c = config_;
  const int64_t B = m.B, T = m.T, N = B * T, C = c.d_model, H = c.heads, D = c.head_dim(), F = c.mlp,
                V = c.vocab_size;
  const float* P = params_.data();
  float* G = grads_.data();
  auto zero = [](const Floats& v) { std::fill(v.begin(), v.end(), 0.0f); };
  const float* x_last = c.layers > 0 ? m.acts.back().res3.data() : m.x0.data();

  // 6. cross-entropy, tied output projection, final norm, on one thread in chunks of rows: each chunk's d
  // logits, normf's out (recomputed) and d normf at the start of their buffers, in cache from the op that
  // writes them to the ones that read them (wte's and the norm's gradients add the chunks' rows in order: the
  // same bits)
  const bool one_thread = posenc::num_threads() == 1;
  const int64_t head_rows = one_thread ? kHeadRows : N;
  zero(m.dres);
  for (int64_t r0 = 0; r0 < N; r0 += head_rows) {
    const int64_t rows = std::min(head_rows, N - r0);
    ops::crossentropy_backward(m.dlogits.data(), m.probs.data() + r0 * V, m.targets.data() + r0,
                               1.0f / static_cast<float>(m.counted), rows, V);
    ops::norm_apply(c.norm, m.normed.data(), x_last + r0 * C, P + m.normf_w,
                    m.normf_b >= 0 ? P + m.normf_b : nullptr, m.normf_mean.data() + r0,
                    m.normf_rstd.data() + r0, rows, C);
    ops::matmul_backward(m.dnorm.data(), G + m.wte, nullptr, m.dlogits.data(), m.normed.data(), P + m.wte,
                         rows, C, V, ops::Dinp::store);
    ops::norm_backward(c.norm, m.dres.data() + r0 * C, G + m.normf_w,
                       m.normf_b >= 0 ? G + m.normf_b : nullptr, m.dnorm.data(), x_last + r0 * C,
                       P + m.normf_w, m.normf_mean.data() + r0, m.normf_rstd.data() + r0, rows, C);
  }

  for (int64_t l = c.layers - 1; l >= 0; --l) {
    const LayerOffsets& o = m.layer[static_cast<size_t>(l)];
    LayerActs& a = m.acts[static_cast<size_t>(l)];
    const float* x = l == 0 ? m.x0.data() : m.acts[static_cast<size_t>(l - 1)].res3.data();
    // 5. res3 = res2 + proj(gelu(fc(norm2(res2)))): dres is d res3, which res2 receives as is;
    // proj's input gradient goes through GELU as it is stored, times the kept gelu' (d fc, not d gelu(fc)).
    // In chunks of rows, so that d fc, norm2's out (recomputed) and d norm2 stay in cache between the ops
    // that write and read them, with norm2's backward in the chunk on one thread (kHeadRows; the weights',
    // biases' and norm's gradients add the chunks' rows in order: the same bits); each chunk requests the
    // next one's gelu' and gelu rows (written by the forward long before: L3 or memory)
    for (int64_t r0 = 0; r0 < N; r0 += kMlpRows) {
      const int64_t rows = std::min(kMlpRows, N - r0), next = std::min(kMlpRows, N - r0 - rows);
      const ops::Ahead ahead{a.fch_dgelu.data() + (r0 + rows) * F, a.fch_gelu.data() + (r0 + rows) * F,
                             next * F};
      // The chunk's gelu' (the factor of the first product's epilogue, streamed past the caches by the
      // forward) in one sequential pass first: read at the end of each tile it stalled the tiles, about 8 us
      // per chunk of 128 rows at the small size for a pass of about 2 us (ops.h)
      ops::read_ahead(a.fch_dgelu.data() + r0 * F, rows * F);
      ops::matmul_backward(m.dfch.data(), G + o.fcproj_w, G + o.fcproj_b, m.dres.data() + r0 * C,
                           a.fch_gelu.data() + r0 * F, P + o.fcproj_w, rows, F, C, ops::Dinp::times,
                           a.fch_dgelu.data() + r0 * F, next > 0 ? ahead : ops::Ahead{});
      ops::norm_apply(c.norm, m.normed.data(), a.res2.data() + r0 * C, P + o.norm2_w,
                      o.norm2_b >= 0 ? P + o.norm2_b : nullptr, a.norm2_mean.data() + r0,
                      a.norm2_rstd.data() + r0, rows, C);
      // d norm2's rows: at the start of dnorm on one thread (norm2's backward follows in the chunk), in
      // place on more (norm2's backward over every row after the chunks)
      float* const dnorm2 = m.dnorm.data() + (one_thread ? 0 : r0 * C);
      ops::matmul_backward(dnorm2, G + o.fc_w, G + o.fc_b, m.dfch.data(), m.normed.data(), P + o.fc_w, rows,
                           C, F, ops::Dinp::store);
      if (one_thread)
        ops::norm_backward(c.norm, m.dres.data() + r0 * C, G + o.norm2_w,
                           o.norm2_b >= 0 ? G + o.norm2_b : nullptr, dnorm2, a.res2.data() + r0 * C,
                           P + o.norm2_w, a.norm2_mean.data() + r0, a.norm2_rstd.data() + r0, rows, C);
    }
    if (!one_thread)
      ops::norm_backward(c.norm, m.dres.data(), G + o.norm2_w, o.norm2_b >= 0 ? G + o.norm2_b : nullptr,
                         m.dnorm.data(), a.res2.data(), P + o.norm2_w, a.norm2_mean.data(),
                         a.norm2_rstd.data(), N, C);
    const registry::LabModel shape = lab_model(c, m.rope ? &*m.rope : nullptr);
    const AttentionConfig cfg =
        attention_config(c, tensors_in(layout_, o.prefix, params_.data()), shape.rope);
    AttentionGrads grads;  // each table's gradient has the table's shape, at the same offset in G
    for (const registry::Entry* e : c.encoding.entries())
      if (e->lab.attention_grads) e->lab.attention_grads(shape, cfg, tensors_in(layout_, o.prefix, G), grads);
    // Steps 4 to 2 in chunks of whole windows, so that d atty and dqkv stay in cache between the products
    // and the attention that write and read them (each window's attention computes alone; the weights',
    // biases' and norm's gradients add the chunks' rows in order: the same bits). An attention with
    // parameters of its own (relative tables, Shaw, Transformer-XL) sums their gradients over every
    // window at once: one chunk.
    const bool own_grads = grads.relative_table.data || grads.shaw_a_k.data || grads.shaw_a_v.data ||
                           grads.transformer_xl_u.data || grads.transformer_xl_v.data ||
                           grads.transformer_xl_w_r.data || grads.sinks.data;
    // d atty, dqkv and d norm1 live within a chunk: every chunk writes and reads them from the start of
    // their buffers, lines that stay in L2 from one chunk to the next (rows of their own would be lines
    // not in cache, read from L3 or memory before each write).
    const int64_t windows = own_grads ? B : std::clamp<int64_t>(kQkvRows / T, 1, B);
    for (int64_t b0 = 0; b0 < B; b0 += windows) {
      const int64_t nb = std::min(windows, B - b0), r0 = b0 * T, rows = nb * T;
      // 4. res2 = x + proj(atty): dres is now d res2
      ops::matmul_backward(m.datty.data(), G + o.proj_w, G + o.proj_b, m.dres.data() + r0 * C,
                           a.atty.data() + r0 * C, P + o.proj_w, rows, C, C, ops::Dinp::store);
      // 3. attention (attention.h: through RoPE, into the encoding's tables); dqkv stored
      m.attention.backward(cfg, a.qkv.data() + r0 * 3 * C, nb, T, H, D, view(m.positions.data(), {T}),
                           a.atty.data() + r0 * C, a.lse.data() + b0 * H * T, m.datty.data(), m.dqkv.data(),
                           grads);
      // 2. qkv = linear(norm1(x)), and x's residual path: dres becomes d x
      ops::norm_apply(c.norm, m.normed.data(), x + r0 * C, P + o.norm1_w,
                      o.norm1_b >= 0 ? P + o.norm1_b : nullptr, a.norm1_mean.data() + r0,
                      a.norm1_rstd.data() + r0, rows, C);
      ops::matmul_backward(m.dnorm.data(), G + o.qkv_w, G + o.qkv_b, m.dqkv.data(), m.normed.data(),
                           P + o.qkv_w, rows, C, 3 * C, ops::Dinp::store);
      ops::norm_backward(c.norm, m.dres.data() + r0 * C, G + o.norm1_w,
                         o.norm1_b >= 0 ? G + o.norm1_b : nullptr, m.dnorm.data(), x + r0 * C, P + o.norm1_w,
                         a.norm1_mean.data() + r0, a.norm1_rstd.data() + r0, rows, C);
    }
  }
  // 1. embeddings: the encodings' tables (a learned one) and wte receive d x0
  const registry::LabModel shape = lab_model(c);
  for (const registry::Entry* e : c.encoding.entries())
    if (e->lab.embeddings_backward)
      e->lab.embeddings_backward(shape, tensors_in(layout_, "", G), view(m.positions.data(), {T}),
                                 view(static_cast<const float*>(m.dres.data()), {B, T, C}));
  ops::embedding_backward(G + m.wte, m.dres.data(), m.tokens.data(), std::sqrt(static_cast<float>(C)), N, C);
}

}  // namespace posenc::lab
