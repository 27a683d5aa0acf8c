"""Fused multi-head attention with any positional encoding (FlashAttention-style tiles and online
softmax: no [Q, K] score matrix is built), forward and backward.

encoding: None, or '+'-joined parts: "rope", at most one bias of "alibi", "t5", "relative", and one of "shaw"
or "transformer_xl" (also accepted as "xl") (e.g. "rope+alibi", "rope+t5", "rope+shaw").
Shapes: q [B, Q, H, D], k [B, K, Hkv, D], v [B, K, Hkv, Dv] with H a multiple of Hkv (grouped-query
attention); out [B, Q, H, Dv]. Dv may differ from D (DeepSeek's multi-head latent attention: q/k heads 192,
v heads 128), and rope_offset puts RoPE on dims [rope_offset, rope_offset + rotary dims) of the q/k head
(DeepSeek: the last 64 of 192).
"""
from __future__ import annotations

import numpy as np

from . import _core
from ._checks import activation, bits, choice, fail, float32, integer, positions, real, storage
from .rope import RopeConfig, rope_config

_PARTS = ("rope", "alibi", "t5", "relative", "shaw", "transformer_xl")
# Earlier names still accepted as input (posenc list prints them as aliases).
_PART_ALIASES = {"xl": "transformer_xl"}
_PARAM_ALIASES = {f"xl_{n}": f"transformer_xl_{n}" for n in ("u", "v", "w_r", "base")}
_PARAMS = {
    "rope": {"base", "rotary_dim", "layout", "rope_scaling", "max_position_embeddings", "rope_config",
             "rope_offset"},
    "alibi": {"slopes", "alibi_bias_max", "symmetric"},
    "t5": {"relative_table", "num_buckets", "max_distance", "bidirectional"},
    "relative": {"relative_table", "max_distance"},
    "shaw": {"shaw_a_k", "shaw_a_v", "shaw_max_distance"},
    "transformer_xl": {"transformer_xl_u", "transformer_xl_v", "transformer_xl_w_r", "transformer_xl_base"},
}
_TABLES = ("relative_table", "shaw_a_k", "shaw_a_v", "transformer_xl_u", "transformer_xl_v",
           "transformer_xl_w_r")


def parse_encoding(encoding) -> list[str]:
    if encoding is None or encoding == "none":
        return []
    if not isinstance(encoding, str):
        fail(f"encoding = {encoding!r} is invalid: expected a string such as 'rope+alibi'")
    parts = [_PART_ALIASES.get(p, p) for p in encoding.split("+")]
    for p in parts:
        choice("encoding part", p, _PARTS)
    if len(set(parts)) != len(parts):
        fail(f"encoding = {encoding!r} is invalid: a part appears twice")
    if sum(p in ("alibi", "t5", "relative") for p in parts) > 1:
        fail(f"encoding = {encoding!r} is invalid: at most one of alibi, t5, relative")
    if "shaw" in parts and "transformer_xl" in parts:
        fail(f"encoding = {encoding!r} is invalid: shaw and transformer_xl are alternatives")
    return parts


def canonical_params(params: dict) -> dict:
    """The parameters under their canonical names (xl_u -> transformer_xl_u, ...)."""
    out = {}
    for key, value in params.items():
        name = _PARAM_ALIASES.get(key, key)
        if name in out:
            fail(f"{key}: given twice (as {name} too)")
        out[name] = value
    return out


class AttentionCall:
    """One attention configuration, checked once, run forward and backward (posenc.torch uses it)."""

    def __init__(self, q_shape, causal=False, scale=None, encoding=None, window=0, softcap=0.0, sinks=None,
                 chunk=0, query_temperature=None, round_probabilities=False, rotate_values=False, **params):
        if len(q_shape) != 4:
            fail(f"q: rank {len(q_shape)} is invalid: expected [batch, seq, heads, head_dim]")
        self.parts = parse_encoding(encoding)
        params = canonical_params(params)
        allowed = set().union(*(_PARAMS[p] for p in self.parts))
        for key in params:
            if key not in allowed:
                fail(f"{key}: not a parameter of encoding {encoding!r} "
                     f"(its parameters: {', '.join(sorted(allowed)) or 'none'})")
        heads, head_dim = int(q_shape[2]), int(q_shape[3])
        self.params = params
        rope, rope_offset = None, 0
        if "rope" in self.parts:
            rope_offset = integer("rope_offset", params.get("rope_offset", 0), 0)
            rope = params.get("rope_config")
            if rope is not None:
                if not isinstance(rope, RopeConfig):
                    fail(f"rope_config: expected a posenc.RopeConfig, got {type(rope).__name__}")
                if len(params.keys() & (_PARAMS["rope"] - {"rope_config", "rope_offset"})):
                    fail("rope_config: given together with other rope arguments; pass one or the other")
            else:  # RoPE on [rope_offset, head_dim)
                if rope_offset >= head_dim:
                    fail(f"rope_offset = {rope_offset} is invalid: must be < head_dim = {head_dim}")
                rope_params = {k: v for k, v in params.items() if k in _PARAMS["rope"] - {"rope_offset"}}
                rope = rope_config(head_dim - rope_offset, **rope_params)
        bias, bucketing, num_buckets, max_distance, bidirectional = "none", "t5", 32, 128, not causal
        self.tables = {}
        if "alibi" in self.parts:
            bias = "alibi"
        for kind in ("t5", "relative"):
            if kind in self.parts:
                bias = "relative"
                if "relative_table" not in params:
                    fail(f"relative_table: required by encoding {kind!r} ([rows, heads] float32)")
                self.tables["relative_table"] = float32("relative_table", params["relative_table"], (2,),
                                                        finite=True)
                rows = self.tables["relative_table"].shape[0]
                if kind == "t5":
                    num_buckets = integer("num_buckets", params.get("num_buckets", rows), 1)
                    max_distance = integer("max_distance", params.get("max_distance", 128), 1)
                    bidirectional = bool(params.get("bidirectional", not causal))
                else:
                    bucketing = "clipped"
                    max_distance = integer("max_distance", params.get("max_distance", (rows - 1) // 2), 0)
        shaw_max_distance = transformer_xl_d_model = 0
        if "shaw" in self.parts:
            if "shaw_a_k" not in params:
                fail("shaw_a_k: required by encoding 'shaw' ([2 * max_distance + 1, head_dim] float32)")
            self.tables["shaw_a_k"] = float32("shaw_a_k", params["shaw_a_k"], (2,), finite=True)
            if params.get("shaw_a_v") is not None:
                self.tables["shaw_a_v"] = float32("shaw_a_v", params["shaw_a_v"], (2,), finite=True)
            rows = self.tables["shaw_a_k"].shape[0]
            default = (rows - 1) // 2
            shaw_max_distance = integer("shaw_max_distance", params.get("shaw_max_distance", default), 1)
        if "transformer_xl" in self.parts:
            for name, shape in (("transformer_xl_u", "[heads, head_dim]"),
                                ("transformer_xl_v", "[heads, head_dim]"),
                                ("transformer_xl_w_r", "[heads * head_dim, d_model]")):
                if params.get(name) is None:
                    fail(f"{name}: required by encoding 'transformer_xl' ({shape} float32)")
                self.tables[name] = float32(name, params[name], (2,), finite=True)
            transformer_xl_d_model = self.tables["transformer_xl_w_r"].shape[1]
        if scale is not None:
            scale = real("scale", scale, positive=True)
        softcap = 0.0 if softcap is None else real("softcap", softcap)
        if softcap < 0:
            fail(f"softcap = {softcap} is invalid: must be >= 0 (0: no softcapping)")
        chunk = integer("chunk", 0 if chunk is None else chunk, 0)
        if sinks is not None:
            self.tables["sinks"] = float32("sinks", sinks, (1,), finite=True)
            if self.tables["sinks"].shape[0] != heads:
                fail(f"sinks: shape {list(self.tables['sinks'].shape)} is invalid: "
                     f"expected [heads] = [{heads}]")
        rule, t_scale, t_floor = _query_temperature(query_temperature)
        self.core = _core.Attention(
            causal=bool(causal), window=integer("window", window, 0), scale=scale, rope=rope, bias=bias,
            heads=heads, alibi_slopes=choice("slopes", params.get("slopes", "bloom"), ("bloom", "mpt")),
            alibi_bias_max=real("alibi_bias_max", params.get("alibi_bias_max", 8.0), positive=True),
            alibi_symmetric=bool(params.get("symmetric", not causal)), bucketing=bucketing,
            num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional,
            shaw_max_distance=shaw_max_distance, head_dim=head_dim,
            transformer_xl_d_model=transformer_xl_d_model,
            transformer_xl_base=real("transformer_xl_base", params.get("transformer_xl_base", 10000.0),
                                     positive=True),
            chunk=chunk, softcap=softcap, rope_offset=rope_offset, temperature_rule=rule,
            temperature_scale=t_scale, temperature_floor_scale=t_floor,
            round_probabilities=bool(round_probabilities), rotate_values=bool(rotate_values))

    @staticmethod
    def positions(q_positions=None, k_positions=None, cu_seqlens_q=None, cu_seqlens_k=None) -> dict:
        out = {}
        for name, value, ndims in (("q_positions", q_positions, (1, 2)), ("k_positions", k_positions, (1, 2)),
                                   ("cu_seqlens_q", cu_seqlens_q, (1,)),
                                   ("cu_seqlens_k", cu_seqlens_k, (1,))):
            if value is not None:
                out[name] = positions(name, value, ndims)
        return out

    def forward(self, q, k, v, **positions_):
        """out in q's dtype (float32, float16 or bfloat16: 16-bit inputs are read without a conversion
        copy and computed in fp32), lse float32. k and v share one dtype."""
        q, k, v = (activation(n, a, (4,)) for n, a in (("q", q), ("k", k), ("v", v)))
        if storage(k) != storage(v):
            fail(f"v: dtype {v.dtype} differs from k's {k.dtype}: keys and values share one storage")
        out = np.empty(q.shape[:3] + (v.shape[3],), dtype=q.dtype)
        lse = np.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=np.float32)
        self.core.forward(bits(q), bits(k), bits(v), bits(out), lse, self.positions(**positions_),
                          self.tables, storage(q), storage(k))
        return out, lse

    def backward(self, q, k, v, out, lse, grad_out, **positions_) -> dict:
        """Gradients of q, k, v in their own dtypes (16-bit inputs are widened once inside, each gradient
        computed in fp32 and rounded once); the tables' gradients float32."""
        q, k, v, out, grad_out = (activation(n, a, (4,)) for n, a in (("q", q), ("k", k), ("v", v),
                                                                      ("out", out), ("grad_out", grad_out)))
        if storage(k) != storage(v):
            fail(f"v: dtype {v.dtype} differs from k's {k.dtype}: keys and values share one storage")
        lse = float32("lse", lse, (3,))
        grads = {"q": np.zeros(q.shape, q.dtype), "k": np.zeros(k.shape, k.dtype),
                 "v": np.zeros(v.shape, v.dtype)}
        grads.update({name: np.zeros(t.shape, np.float32) for name, t in self.tables.items()})
        core_grads = {name: bits(g) for name, g in grads.items()}
        self.core.backward(bits(q), bits(k), bits(v), bits(out), lse, bits(grad_out),
                           self.positions(**positions_), self.tables, core_grads, storage(q), storage(k),
                           storage(out), storage(grad_out))
        return grads


def _query_temperature(value) -> tuple[str, float, float]:
    """(rule, scale, floor_scale) of None, a LayerPlan's attention.temperature, a (rule, scale, floor_scale)
    tuple or a dict with those keys."""
    if value is None:
        return "none", 0.0, 0.0
    if isinstance(value, _core.QueryTemperature):
        return value.kind, value.scale, value.floor_scale
    if isinstance(value, dict):
        unknown = value.keys() - {"rule", "scale", "floor_scale"}
        if unknown:
            fail(f"query_temperature: unknown keys {sorted(unknown)} (expected rule, scale, floor_scale)")
        value = (value.get("rule"), value.get("scale"), value.get("floor_scale"))
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        fail(f"query_temperature = {value!r} is invalid: expected (rule, scale, floor_scale), "
             "e.g. ('llama4', 0.1, 8192)")
    rule = choice("query_temperature rule", value[0], ("none", "llama4", "ministral3", "qwen_logn"))
    return rule, real("query_temperature scale", value[1]), real("query_temperature floor_scale", value[2])


def attention(q, k, v, *, causal=False, scale=None, encoding=None, q_positions=None, k_positions=None,
              window=0, cu_seqlens_q=None, cu_seqlens_k=None, return_lse=False, softcap=0.0, sinks=None,
              chunk=0, query_temperature=None, round_probabilities=False, rotate_values=False,
              **encoding_params):
    """softmax(scale * q k^T + bias) v with the encoding applied inside the fused kernel.

    Default positions: keys 0..K-1, queries aligned to the end (K-Q..K-1), as a KV cache. scale
    defaults to 1/sqrt(head_dim). Encoding parameters: rope (base, rotary_dim, layout, rope_scaling,
    max_position_embeddings, or rope_config), alibi (slopes, alibi_bias_max, symmetric), t5
    (relative_table [num_buckets, heads], max_distance, bidirectional), relative (relative_table
    [2 * max_distance + 1, heads]), shaw (shaw_a_k, shaw_a_v [2 * max_distance + 1, head_dim]), xl
    (transformer_xl_u, transformer_xl_v [heads, head_dim], transformer_xl_w_r [heads * head_dim, d_model],
    transformer_xl_base). Packed sequences (batch 1): cu_seqlens_q, cu_seqlens_k, the int64 cumulative
    lengths [N + 1].
    softcap > 0: logit softcapping (Gemma 2): the scaled content logit x becomes softcap * tanh(x /
    softcap) before the bias and the mask. sinks [H] float32: learned attention sinks (gpt-oss), one
    unscaled logit per head that joins each row's softmax denominator without a value. chunk > 0:
    chunked attention (Llama 4's attention_chunk_size): a query sees only keys with
    k_pos // chunk == q_pos // chunk. query_temperature: q scaled per position after RoPE,
    ("llama4", attn_scale, floor_scale): 1 + attn_scale log(1 + floor((pos + 1) / floor_scale)) (Llama 4's
    NoPE layers), or
    ("ministral3", beta, original_max_position_embeddings): 1 + beta log(1 + floor(pos / original)), or
    ("qwen_logn", 0, seq_length): log(pos + 1) / log(seq_length) past seq_length (Qwen 1's use_logn_attn);
    a LayerPlan's attention.temperature is accepted as is. rope_offset (with "rope"): RoPE on dims
    [rope_offset, ...) of the q/k head. A real model's layer: posenc.attention(q, k, v,
    **layer.attention_config()).
    float16 and bfloat16 (ml_dtypes) q, k, v are read as they are (16-bit tiles widened inside the kernel,
    fp32 products and softmax, out rounded once); k and v share a dtype, q may differ (fp32 q against a
    16-bit cache). Returns out [B, Q, H, Dv] in q's dtype (float32 for other types), and the row
    log-sum-exp [B, H, Q] float32 with return_lse=True. attention_backward computes in float32 (16-bit
    inputs are converted there).
    round_probabilities=True (bfloat16 k and v only): each probability is rounded once to bfloat16 before
    P V, as GPU flash attention does (posenc/attention.h AttentionConfig::round_probabilities: the error
    bound).
    rotate_values=True (with "rope", float32 v and out): DeepSeek-V4's values, rotated like the keys on the
    RoPE range, and the output rotated back at the query's position (o_t = sum_s p_ts R(s - t) v_s).
    """
    call = AttentionCall(np.shape(q), causal=causal, scale=scale, encoding=encoding, window=window,
                         softcap=softcap, sinks=sinks, chunk=chunk, query_temperature=query_temperature,
                         round_probabilities=round_probabilities, rotate_values=rotate_values,
                         **encoding_params)
    out, lse = call.forward(q, k, v, q_positions=q_positions, k_positions=k_positions,
                            cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    return (out, lse) if return_lse else out


def attention_backward(q, k, v, out, lse, grad_out, *, causal=False, scale=None, encoding=None,
                       q_positions=None, k_positions=None, window=0, cu_seqlens_q=None, cu_seqlens_k=None,
                       softcap=0.0, sinks=None, chunk=0, query_temperature=None, rotate_values=False,
                       **encoding_params) -> dict:
    """Gradients of attention: a dict with q, k, v and the encoding's tables that were given
    (relative_table, shaw_a_k, shaw_a_v, transformer_xl_u, transformer_xl_v, transformer_xl_w_r),
    and sinks when given. The keyword arguments are attention()'s (rotate_values: DeepSeek-V4's rotated
    values, with the forward's out and lse)."""
    call = AttentionCall(np.shape(q), causal=causal, scale=scale, encoding=encoding, window=window,
                         softcap=softcap, sinks=sinks, chunk=chunk, query_temperature=query_temperature,
                         rotate_values=rotate_values, **encoding_params)
    return call.backward(q, k, v, out, lse, grad_out, q_positions=q_positions, k_positions=k_positions,
                         cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)


__all__ = ["attention", "attention_backward", "AttentionCall"]
